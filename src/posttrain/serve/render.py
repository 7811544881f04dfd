"""Turning engine output into OpenAI-shaped JSON: choices, stream chunks, errors, usage."""

from __future__ import annotations

import json
import time
import uuid

from fastapi.responses import JSONResponse


def error_response(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def envelope(rid: str, obj: str, model: str, choices: list, **extra) -> dict:
    return {"id": rid, "object": obj, "created": int(time.time()), "model": model, "choices": choices, **extra}


def sse(payload: dict | str) -> str:
    return f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n"


def token_strings(tokenizer, ids: list[int]) -> list[str]:
    if tokenizer is None:
        return [str(i) for i in ids]
    return [tokenizer.decode([i]) for i in ids]


def decode(tokenizer, ids: list[int]) -> str:
    return "" if tokenizer is None else tokenizer.decode(ids, skip_special_tokens=True)


class TextStream:
    """Incremental detokenisation: emit only text that is final (no half UTF-8 character)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.sent = ""

    def push(self, ids: list[int], final: bool) -> str:
        self.ids.extend(ids)
        text = decode(self.tokenizer, self.ids)
        if text.endswith("\ufffd") and not final:
            return ""
        delta, self.sent = text[len(self.sent) :], text
        return delta


def completion_logprobs(tokenizer, ids: list[int], lps: list[float]) -> dict:
    return {"tokens": token_strings(tokenizer, ids), "token_logprobs": lps, "top_logprobs": None, "text_offset": []}


def chat_logprobs(tokenizer, ids: list[int], lps: list[float]) -> dict:
    toks = token_strings(tokenizer, ids)
    return {"content": [{"token": t, "logprob": lp, "bytes": list(t.encode()), "top_logprobs": []} for t, lp in zip(toks, lps)]}


def usage(prompts: list[list[int]], outputs: list[list[int]]) -> dict:
    p, c = sum(map(len, prompts)), sum(map(len, outputs))
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
