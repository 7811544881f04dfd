"""Turning engine output into OpenAI-shaped JSON: choices' logprobs, stream chunks, usage
(error bodies: posttrain/openai_errors.py)."""

from __future__ import annotations

import json
import time
import uuid


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def envelope(rid: str, obj: str, model: str, choices: list, **extra) -> dict:
    return {"id": rid, "object": obj, "created": int(time.time()), "model": model, "choices": choices, **extra}


def sse(payload: dict | str) -> str:
    return f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n"


def completion_logprobs(detok, ids: list[int], lps: list, tops: list | None, start_offset: int = 0) -> dict:
    """The legacy completions shape; tops[i] is {id: logprob} (None at an echoed first token).

    OpenAI lists the chosen token among the alternatives even when it is not in the top k."""
    tokens = [detok.token(i) for i in ids]
    offsets, at = [], start_offset
    for t in tokens:
        offsets.append(at)
        at += len(t)
    top_dicts = None
    if tops is not None:
        top_dicts = []
        for tok_id, lp, top in zip(ids, lps, tops):
            if top is None:
                top_dicts.append(None)
                continue
            d = {detok.token(j): v for j, v in top.items()}
            d.setdefault(detok.token(tok_id), lp)
            top_dicts.append(d)
    return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": top_dicts, "text_offset": offsets}


def _entry(detok, token_id: int, lp: float) -> dict:
    t = detok.token(token_id)
    return {"token": t, "logprob": lp, "bytes": list(t.encode())}


def chat_logprobs(detok, ids: list[int], lps: list[float], tops: list | None) -> dict:
    content = []
    for i, (tok_id, lp) in enumerate(zip(ids, lps)):
        alts = tops[i] if tops else {}
        content.append({**_entry(detok, tok_id, lp), "top_logprobs": [_entry(detok, j, v) for j, v in alts.items()]})
    return {"content": content}


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    total = prompt_tokens + completion_tokens
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": total}
