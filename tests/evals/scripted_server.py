"""A real OpenAI-compatible HTTP server (FastAPI + uvicorn on loopback) that scripts tool calls.

Used by the eval tests in place of `posttrain serve` where a deterministic model is needed:
it plays each task's oracle (solution/steps.json) as `bash` tool calls, then `submit`, or
misbehaves on purpose (malformed calls, no tool calls, 429/500, context overflow, slowness).
The eval harness talks to it over real HTTP, exactly as to a hosted endpoint.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


@dataclass
class Script:
    """How the scripted model behaves. `oracle` maps an instruction to its shell steps."""

    oracle: dict[str, list[str]] = field(default_factory=dict)
    mode: str = "oracle"        # oracle | malformed | no_tools | overflow | status
    fail_odd_attempts: bool = False  # submit at once on odd attempts (gives a pass/fail mix)
    status_code: int = 500      # for mode "status": always answer this code
    fail_first: int = 0         # answer fail_first requests with fail_code, then behave
    fail_code: int = 429
    delay_s: float = 0.0
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    on_request: Callable[[int], None] | None = None  # called with each request's number, before it is answered


def oracle_map(tasks_dir) -> dict[str, list[str]]:
    """{instruction: oracle steps}; task dirs whose instruction repeats an earlier one are
    deleted, since the server knows a task only by its instruction."""
    import shutil

    from posttrain.tasks import load_tasks

    out: dict[str, list[str]] = {}
    for t in load_tasks(tasks_dir):
        if t.instruction in out:
            shutil.rmtree(t.path)
        else:
            out[t.instruction] = t.oracle_steps()
    return out


def _tool_call(i: int, name: str, arguments: str) -> dict:
    return {"id": f"call_{i}", "type": "function",
            "function": {"name": name, "arguments": arguments}}


def _reply(message: dict, prompt_tokens: int) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"
                         if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 7,
                      "total_tokens": prompt_tokens + 7}}


def next_message(script: Script, body: dict) -> dict:
    msgs = body["messages"]
    n_done = sum(1 for m in msgs if m["role"] == "assistant")
    if script.mode == "malformed":
        return {"role": "assistant", "content": None,
                "tool_calls": [_tool_call(n_done, "bash", "{not json")]}
    if script.mode == "no_tools":
        return {"role": "assistant", "content": "I would run ls."}
    instruction = next(m["content"] for m in msgs if m["role"] == "user")
    steps = script.oracle.get(instruction, [])
    attempt = (body.get("seed") or 0) // 1000 % 1000
    if script.fail_odd_attempts and attempt % 2 == 1:
        steps = []
    if n_done < len(steps):
        return {"role": "assistant", "content": None,
                "tool_calls": [_tool_call(n_done, "bash", json.dumps({"command": steps[n_done]}))]}
    return {"role": "assistant", "content": None, "tool_calls": [_tool_call(n_done, "submit", "{}")]}


def make_app(script: Script) -> FastAPI:
    app = FastAPI()

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": "scripted", "object": "model"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        with script.lock:
            script.requests += 1
            n = script.requests
        if script.on_request is not None:
            script.on_request(n)
        if script.delay_s:
            await asyncio.sleep(script.delay_s)
        if n <= script.fail_first:
            return JSONResponse({"error": {"message": "slow down"}}, status_code=script.fail_code,
                                headers={"retry-after": "0"})
        if script.mode == "status":
            return JSONResponse({"error": {"message": "boom"}}, status_code=script.status_code)
        if script.mode == "overflow":
            return JSONResponse({"error": {"message": "This model's maximum context length is 8",
                                           "code": "context_length_exceeded"}}, status_code=400)
        prompt_tokens = sum(len(str(m.get("content") or "")) for m in body["messages"]) // 4
        return _reply(next_message(script, body), prompt_tokens)

    return app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(script: Script):
    """Run the scripted server on a free loopback port; yields its base URL (…/v1)."""
    return serve_app(make_app(script))


@contextmanager
def serve_app(app):
    """Run any ASGI app (this one, or `posttrain serve`'s) on a free loopback port."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not server.started:
        if time.time() > deadline:
            raise RuntimeError("scripted server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
