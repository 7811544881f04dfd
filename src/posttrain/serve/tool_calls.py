"""Tool calls out of a reply: Hermes/Qwen-style `<tool_call>{"name": .., "arguments": ..}</tool_call>`
blocks become OpenAI `tool_calls`; malformed blocks stay text."""

from __future__ import annotations

import json
import re
import uuid

TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


def parse_tool_calls(text: str) -> tuple[str, list[dict]]:
    """Split tool-call blocks out of a reply; returns (remaining content, OpenAI tool_calls)."""
    calls, kept, last = [], [], 0
    for m in TOOL_CALL.finditer(text):
        try:
            obj = json.loads(m.group(1))
            name, args = obj["name"], obj.get("arguments", {})
        except (ValueError, KeyError, TypeError):
            continue
        kept.append(text[last : m.start()])
        last = m.end()
        arguments = args if isinstance(args, str) else json.dumps(args)
        calls.append({"id": f"call_{uuid.uuid4().hex[:16]}", "type": "function", "function": {"name": name, "arguments": arguments}})
    kept.append(text[last:])
    return "".join(kept).strip() if calls else text, calls
