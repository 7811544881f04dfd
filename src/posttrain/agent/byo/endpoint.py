"""The rollout endpoint: an OpenAI-compatible API a user's own agent program talks to, one API
key per episode. FastAPI on uvicorn in a thread of its own, on 127.0.0.1 and a free port.

    POST /v1/chat/completions   messages, tools, max_tokens (non-streaming): the episode's engine
                                answers; `<tool_call>` blocks come back as tool_calls
    POST /v1/tools/{name}       a JSON object of arguments: the call run in the episode's
                                sandbox -> {"output": "..."}; `submit` ends the episode
    GET  /v1/task               {"instruction", "tools": [OpenAI tool specs, submit included]}

`Authorization: Bearer <episode key>` on each; an unknown key is a 401 in OpenAI's error shape.
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
import time

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool

from posttrain.agent.byo.session import EndpointError, Session
from posttrain.errors import ConfigError
from posttrain.openai_errors import error_response


class RolloutEndpoint:
    """Sessions by key, served over HTTP while started: `with RolloutEndpoint() as ep: ...`."""

    def __init__(self, host: str = "127.0.0.1"):
        self.sessions: dict[str, Session] = {}
        self.lock = threading.Lock()
        self.sock = socket.create_server((host, 0))      # bound here: the port is known at once
        self.host, self.port = host, self.sock.getsockname()[1]
        self.server = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def register(self, session: Session) -> str:
        key = f"ep-{secrets.token_urlsafe(18)}"
        with self.lock:
            self.sessions[key] = session
        return key

    def unregister(self, key: str) -> None:
        with self.lock:
            self.sessions.pop(key, None)

    def start(self) -> RolloutEndpoint:
        import uvicorn

        config = uvicorn.Config(self.app(), log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="byo-endpoint", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise ConfigError(f"the rollout endpoint on {self.host}:{self.port} did not start")
            time.sleep(0.01)
        return self

    def close(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
            self.thread.join(timeout=10)
        self.sock.close()

    def __enter__(self) -> RolloutEndpoint:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _session(self, request: Request) -> Session:
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        with self.lock:
            session = self.sessions.get(given)
        if session is None:
            raise EndpointError(401, "unknown API key: each episode has its own (OPENAI_API_KEY)",
                                "invalid_api_key")
        return session

    def app(self) -> FastAPI:
        app = FastAPI(title="posttrain rollout endpoint")

        @app.exception_handler(EndpointError)
        async def refused(request: Request, e: EndpointError):
            return error_response(e.status, e.message, e.code)

        @app.get("/v1/task")
        async def task(request: Request):
            return self._session(request).task()

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            session = self._session(request)
            body = await _json_object(request)
            if body.get("stream"):
                raise EndpointError(400, "streaming is not supported: send stream=false", "stream")
            if body.get("n", 1) != 1:
                raise EndpointError(400, "n must be 1", "n")
            messages = body.get("messages")
            if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
                raise EndpointError(400, "messages must be a list of message objects", "messages")
            limit = body.get("max_completion_tokens", body.get("max_tokens"))
            if limit is not None and (not isinstance(limit, int) or limit < 1):
                raise EndpointError(400, "max_tokens must be a positive integer", "max_tokens")
            message, finish, call = await run_in_threadpool(session.complete, messages, limit)
            prompt_tokens, completion_tokens = len(call.prompt), len(call.completion.token_ids)
            return {"id": f"chatcmpl-{secrets.token_hex(8)}", "object": "chat.completion",
                    "created": int(time.time()), "model": body.get("model") or "policy",
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                              "total_tokens": prompt_tokens + completion_tokens}}

        @app.post("/v1/tools/{name}")
        async def tool(name: str, request: Request):
            session = self._session(request)
            raw = (await request.body()).decode("utf-8", errors="replace")
            return {"output": await run_in_threadpool(session.call_tool, name, raw)}

        return app


async def _json_object(request: Request) -> dict:
    try:
        body = json.loads(await request.body() or b"{}")
    except json.JSONDecodeError as e:
        raise EndpointError(400, f"the body is not JSON ({e.msg})", "invalid_json") from None
    if not isinstance(body, dict):
        raise EndpointError(400, "the body must be a JSON object", "invalid_json")
    return body
