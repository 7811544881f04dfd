"""Tool calls written in a model's reply text, read and written in the formats chat models use.

Two forms: Hermes/Qwen's one object per block,
`<tool_call>{"name": "kv_get", "arguments": {"key": "a"}}</tool_call>`, and the list form of
SmolLM2's model card, `<tool_call>[{"name": ..., "arguments": {...}}, ...]</tool_call>`. A last
block whose closing tag a token limit or stop token cut off is still read. The agent harness
(agent/harness/) and `posttrain serve` (serve/tool_calls.py) both read calls here.
"""

from __future__ import annotations

import json
import re

OPEN = "<tool_call>"
CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)


def call_blocks(text: str) -> list[tuple[re.Match, list[dict | str]]]:
    """Each block with its calls: {"name", "arguments"} as written, or the raw text of one that
    is not a JSON call object."""
    return [(m, _calls(m.group(1))) for m in CALL_RE.finditer(text or "")]


def _calls(raw: str) -> list[dict | str]:
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError:
        return [raw]
    return [one if isinstance(one, dict) and isinstance(one.get("name"), str) else json.dumps(one)
            for one in (obj if isinstance(obj, list) else [obj])]


def read_calls(text: str) -> list[dict | str]:
    """Every call in the text, in order (see call_blocks)."""
    return [c for _, calls in call_blocks(text) for c in calls]


def write_call(name: str, args: dict, as_list: bool) -> str:
    """A call as a reply: the list form (SmolLM2's card) or one Hermes object."""
    body = json.dumps({"name": name, "arguments": args})
    return f"{OPEN}{'[' + body + ']' if as_list else body}</tool_call>"
