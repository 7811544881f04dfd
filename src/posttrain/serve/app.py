"""The OpenAI-compatible HTTP face of the engine (FastAPI): routes, errors and the API key.

/v1/completions (text or token-id prompts; `echo` with prompt logprobs), /v1/chat/completions
(tool calls parsed from Hermes/Qwen-style `<tool_call>` blocks when `tools` are given), both
with streaming and logprobs; /v1/models (with a `posttrain` field: the compute dtype), /health
and Prometheus /metrics. Errors use OpenAI's body: a bad request 400, a wrong or missing key
401, an unknown model 404, a failure 500.
"""

from __future__ import annotations

import hmac
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse
from jinja2 import TemplateError

from posttrain.engine.paged.engine import PagedEngine
from posttrain.serve.prompts import chat_prompt, prompt_token_lists
from posttrain.serve.protocol import ChatRequest, CompletionRequest
from posttrain.serve.server import Server


class Unauthorized(Exception):
    pass


FIELDS = set(ChatRequest.model_fields) | set(CompletionRequest.model_fields)


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    """One line for the first problem in a request body, and the field it concerns (None for bad JSON)."""
    first = exc.errors()[0] if exc.errors() else {"msg": "invalid request"}
    msg = first["msg"].removeprefix("Value error, ")
    if first.get("type") == "json_invalid":
        return f"request body is not valid JSON: {msg}", None
    where = ".".join(str(x) for x in first.get("loc", ()) if x != "body") or None
    if first.get("type") == "extra_forbidden":
        return f"unsupported parameter: {where}", where
    if where is None:  # a rule across fields names its field first ("logit_bias is not supported")
        word = msg.split(" ", 1)[0]
        return msg, word if word in FIELDS else None
    return f"{where}: {msg}", where


def create_app(engine: PagedEngine, model_name: str, api_key: str | None = None) -> FastAPI:
    server = Server(engine, model_name)

    @asynccontextmanager
    async def lifespan(_app):
        server.loop.start()
        yield
        server.loop.stop()

    def check_key(request: Request) -> None:
        if api_key is None:
            return
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), api_key.encode()):
            raise Unauthorized()

    app = FastAPI(title="posttrain engine", lifespan=lifespan)
    app.state.server = server
    v1 = [Depends(check_key)]

    @app.exception_handler(RequestValidationError)
    async def bad_body(_request, exc: RequestValidationError):
        message, param = _validation_message(exc)
        return server.error(400, message, param=param)

    @app.exception_handler(Unauthorized)
    async def unauthorized(_request, _exc):
        return server.error(401, "missing or wrong API key (Authorization: Bearer KEY)", code="invalid_api_key")

    @app.exception_handler(Exception)
    async def failure(_request, exc: Exception):
        return server.error(500, f"internal error: {type(exc).__name__}: {exc}")

    @app.get("/health")
    async def health():
        return {"status": "ok", "policy_version": engine.policy_version}

    # `posttrain`: this server's own field; its compute dtype says whether greedy repeats (fp32 does)
    card = {"id": model_name, "object": "model", "created": 0, "owned_by": "posttrain", "max_model_len": engine.max_model_len,
            "posttrain": {"dtype": engine.dtype.name, "dtype_reason": engine.dtype.reason,
                          "attention": engine.attention_backend[0], "attention_reason": engine.attention_backend[1]}}

    @app.get("/v1/models", dependencies=v1)
    async def models():
        return {"object": "list", "data": [card]}

    @app.get("/v1/models/{name:path}", dependencies=v1)
    async def one_model(name: str):
        if name != model_name:
            return server.error(404, f"The model `{name}` does not exist", code="model_not_found", param="model")
        return card

    @app.get("/metrics")
    async def prometheus():
        return PlainTextResponse(server.metrics.render(), media_type="text/plain; version=0.0.4")

    @app.post("/v1/completions", dependencies=v1)
    async def completions(req: CompletionRequest, request: Request):
        try:
            prompts = prompt_token_lists(req.prompt, server.tok)
        except ValueError as e:
            return server.error(400, str(e))
        return await server.serve("completion", req, prompts, request)

    @app.post("/v1/chat/completions", dependencies=v1)
    async def chat(req: ChatRequest, request: Request):
        try:
            prompts = [chat_prompt(req.messages, server.tok, req.active_tools)]
        except (ValueError, TemplateError) as e:
            return server.error(400, str(e))
        return await server.serve("chat", req, prompts, request)

    return app
