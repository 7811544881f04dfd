"""Token counts without a tokenizer: an upper bound at admission, the real count afterwards.

Upper bound: a byte-level BPE token covers at least one UTF-8 byte, so a prompt has at most
as many tokens as bytes, plus a few template tokens per chat message. Token-id prompts are
counted exactly. Afterwards the upstream's `usage` (or, for streams without usage, the
`token_ids` or the number of content chunks) gives what was really used.
"""

from __future__ import annotations

import json

TEMPLATE_TOKENS_PER_MESSAGE = 8


def prompt_upper_bound(body: dict) -> tuple[int, int]:
    """(token upper bound, characters) of a chat or completion request's prompt."""
    if "messages" in body:
        n, chars = 0, 0
        for m in body.get("messages") or []:
            text = m.get("content") if isinstance(m, dict) else None
            if isinstance(text, list):  # content parts
                text = "".join(p.get("text") or "" for p in text if isinstance(p, dict))
            text = text if isinstance(text, str) else ""
            extra = json.dumps(m.get("tool_calls")) if isinstance(m, dict) and m.get("tool_calls") else ""
            chars += len(text)
            n += len(text.encode()) + len(extra.encode()) + TEMPLATE_TOKENS_PER_MESSAGE
        if body.get("tools"):
            n += len(json.dumps(body["tools"]).encode())
        return n, chars
    return _completion_prompt(body.get("prompt"))


def _completion_prompt(prompt) -> tuple[int, int]:
    if isinstance(prompt, str):
        return len(prompt.encode()) + 1, len(prompt)
    if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
        return len(prompt), len(prompt)
    n = chars = 0
    for p in prompt if isinstance(prompt, list) else []:
        a, b = _completion_prompt(p)
        n, chars = n + a, chars + b
    return n, chars


def usage_of(payload: bytes) -> tuple[int | None, int | None, str | None]:
    """(prompt tokens, completion tokens, output text) of a non-streamed response body."""
    try:
        obj = json.loads(payload)
        u = obj.get("usage") or {}
        choices = obj.get("choices") or []
        text = "".join((c.get("message") or {}).get("content") or c.get("text") or "" for c in choices)
        return u.get("prompt_tokens"), u.get("completion_tokens"), text
    except (ValueError, AttributeError, TypeError):
        return None, None, None


class StreamCounter:
    """Reads SSE bytes as they pass: output tokens, usage if the upstream sends it, the text."""

    def __init__(self):
        self.buffer = b""
        self.tokens_out = 0
        self.usage: dict | None = None
        self.parts: list[str] = []

    def feed(self, chunk: bytes) -> None:
        self.buffer += chunk
        *events, self.buffer = self.buffer.split(b"\n\n")
        for event in events:
            if event.startswith(b"data: ") and event[6:].strip() != b"[DONE]":
                self._event(event[6:])

    def _event(self, data: bytes) -> None:
        try:
            obj = json.loads(data)
        except ValueError:
            return
        if obj.get("usage"):
            self.usage = obj["usage"]
        for c in obj.get("choices") or []:
            ids = c.get("token_ids")
            text = (c.get("delta") or {}).get("content") or c.get("text") or ""
            self.tokens_out += len(ids) if isinstance(ids, list) else (1 if text else 0)
            self.parts.append(text)

    def result(self) -> tuple[int | None, int, str]:
        if self.usage:
            return self.usage.get("prompt_tokens"), self.usage.get("completion_tokens", self.tokens_out), "".join(self.parts)
        return None, self.tokens_out, "".join(self.parts)
