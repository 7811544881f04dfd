"""Tool calls out of a reply: `<tool_call>` blocks in Hermes/Qwen's object form or SmolLM2's list
form (read by posttrain.toolcalls) become OpenAI `tool_calls`; malformed blocks stay text."""

from __future__ import annotations

import json
import uuid

from posttrain.serve.text import Detokenizer, TextStream, cut_at_stop
from posttrain.toolcalls import OPEN, call_blocks


def parse_tool_calls(text: str) -> tuple[str, list[dict]]:
    """Split tool-call blocks out of a reply; returns (remaining content, OpenAI tool_calls)."""
    calls, kept, last = [], [], 0
    for m, block in call_blocks(text):
        if not block or not all(isinstance(c, dict) for c in block):
            continue
        kept.append(text[last : m.start()])
        last = m.end()
        for c in block:
            args = c.get("arguments", {})
            arguments = args if isinstance(args, str) else json.dumps(args)
            calls.append({"id": f"call_{uuid.uuid4().hex[:16]}", "type": "function",
                          "function": {"name": c["name"], "arguments": arguments}})
    kept.append(text[last:])
    return "".join(kept).strip() if calls else text, calls


class ToolCallStream:
    """A streamed chat reply when tools are on: content streams up to the first `<tool_call>`;
    the calls come whole with the last chunk (or, if malformed, the rest as plain text)."""

    def __init__(self, detok: Detokenizer, stops: list[str]):
        self.detok, self.stops = detok, stops
        self.content = TextStream(detok, stops + [OPEN])
        self.ids: list[int] = []

    def push(self, ids: list[int], final: bool) -> tuple[str, list[dict]]:
        self.ids.extend(ids)
        delta = self.content.push(ids, final)
        if not final:
            return delta, []
        full = cut_at_stop(self.detok.text(self.ids), self.stops)[0]
        _, calls = parse_tool_calls(full)
        return (delta, calls) if calls else (delta + full[len(self.content.sent) :], [])
