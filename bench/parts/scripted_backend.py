"""A fast scripted OpenAI-compatible backend on loopback, for the gateway's tests and benchmark.

    python bench/parts/scripted_backend.py --port 9001 [--delay-ms 20] [--tokens 8] [--fail-status 500] [--serves ID ...]

It answers /v1/chat/completions and /v1/completions (streamed or not) with `--tokens` tokens
after `--delay-ms` (or `delay_ms=N` in the first message), echoing the request's model, seed and max_tokens in `usage`-bearing
responses; /v1/models lists the `--serves` model ids (default: its `--name`), as a real server lists
the model it loaded, so the gateway's model-id check runs against it, with `--dtype` as
`posttrain serve` reports its compute dtype there; /health answers 200. With --fail-status it answers every completion
with that status. It stands in for a model so that only the gateway's own cost is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


DELAY = re.compile(r"delay_ms=(\d+(?:\.\d+)?)")


def _delay_in(body: dict, default_s: float) -> float:
    """`delay_ms=N` anywhere in the first message (or prompt) overrides --delay-ms: every proxy
    passes message text through untouched, so one backend serves every load level."""
    msgs = body.get("messages") or [{}]
    text = msgs[0].get("content") if isinstance(msgs[0], dict) else None
    text = text if isinstance(text, str) else body.get("prompt") if isinstance(body.get("prompt"), str) else ""
    m = DELAY.search(text)
    return float(m.group(1)) / 1000 if m else default_s


def build_app(delay_s: float, tokens: int, fail_status: int | None, name: str,
              serves: list[str] | None = None, dtype: str | None = None) -> Starlette:
    extra = {"posttrain": {"dtype": dtype}} if dtype else {}

    async def complete(request: Request):
        body = json.loads(await request.body())
        if fail_status:
            return JSONResponse({"error": {"message": "scripted failure", "type": "server_error"}}, status_code=fail_status)
        delay = _delay_in(body, delay_s)
        if delay:
            await asyncio.sleep(delay)
        n_out = min(tokens, body.get("max_tokens") or tokens)
        chat = request.url.path.endswith("chat/completions")
        prompt_tokens = len(json.dumps(body.get("messages") or body.get("prompt") or "")) // 4 + 1
        text = f"{name}:{body.get('seed')}:" + " ".join(f"t{i}" for i in range(n_out))
        if body.get("stream"):
            return StreamingResponse(stream(chat, n_out, body), media_type="text/event-stream")
        choice = {"index": 0, "finish_reason": "length", "token_ids": list(range(n_out))}
        choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
        return JSONResponse({"id": "cmpl-scripted", "object": "chat.completion" if chat else "text_completion",
                             "model": body.get("model"), "choices": [choice],
                             "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n_out,
                                       "total_tokens": prompt_tokens + n_out}})

    async def stream(chat: bool, n_out: int, body: dict):
        for i in range(n_out):
            part = {"index": 0, "token_ids": [i], "finish_reason": "length" if i == n_out - 1 else None}
            part.update({"delta": {"content": f" t{i}"}} if chat else {"text": f" t{i}"})
            yield f"data: {json.dumps({'object': 'chunk', 'model': body.get('model'), 'choices': [part]})}\n\n"
        yield "data: [DONE]\n\n"

    async def models(_request):
        return JSONResponse({"object": "list", "data": [{"id": m, "object": "model", **extra} for m in serves or [name]]})

    async def health(_request):
        return Response("ok")

    return Starlette(routes=[Route("/v1/chat/completions", complete, methods=["POST"]),
                             Route("/v1/completions", complete, methods=["POST"]),
                             Route("/v1/models", models), Route("/health", health)])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--tokens", type=int, default=8)
    p.add_argument("--fail-status", type=int, default=None)
    p.add_argument("--name", default="scripted")
    p.add_argument("--serves", action="append", default=None, help="a model id /v1/models lists (repeatable)")
    p.add_argument("--dtype", default=None, help="the compute dtype /v1/models reports, as posttrain serve does")
    a = p.parse_args()
    app = build_app(a.delay_ms / 1000, a.tokens, a.fail_status, a.name, a.serves, a.dtype)
    uvicorn.run(app, host="127.0.0.1", port=a.port, log_level="warning", access_log=False,
                loop="uvloop", http="httptools", backlog=4096)


if __name__ == "__main__":
    main()
