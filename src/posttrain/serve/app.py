"""The OpenAI-compatible HTTP face of the engine (FastAPI).

/v1/completions (text or token-id prompts), /v1/chat/completions (tool calls parsed from
Hermes/Qwen-style `<tool_call>` blocks when `tools` are given), both with streaming and logprobs; /v1/models, /health and Prometheus /metrics. Bad input answers 400 with an OpenAI
error body; a client that disconnects mid-stream has its sequences aborted, and the engine
keeps serving everyone else.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from posttrain.engine.paged import PagedEngine
from posttrain.serve import render
from posttrain.serve.loop import EngineLoop, Handle
from posttrain.serve.metrics import Metrics
from posttrain.serve.protocol import (
    ChatRequest,
    CompletionRequest,
    chat_prompt,
    parse_tool_calls,
    prompt_token_lists,
)


class Server:
    """Request handling over one EngineLoop; `kind` is "completion" or "chat"."""

    def __init__(self, engine: PagedEngine, model_name: str):
        self.engine = engine
        self.model_name = model_name
        self.loop = EngineLoop(engine)
        self.metrics = Metrics(engine, self.loop)
        self.tok = engine.tokenizer
        self.eos = getattr(self.tok, "eos_token_id", None) if self.tok is not None else None

    async def serve(self, kind: str, req, prompts: list[list[int]]):
        self.metrics.count(f"requests_{kind}")
        expanded = [p for p in prompts for _ in range(req.n)]
        try:
            params = req.sampling_params(self.eos)
            self.engine.check_request(expanded, params)
        except ValueError as e:
            self.metrics.count("errors")
            return render.error_response(400, str(e))
        handle = self.loop.submit(expanded, params)
        rid = render.new_id("cmpl" if kind == "completion" else "chatcmpl")
        if req.stream:
            return StreamingResponse(self.stream(kind, req, handle, rid), media_type="text/event-stream")
        return await self.collect(kind, req, handle, rid)

    async def collect(self, kind: str, req, handle: Handle, rid: str):
        n = len(handle.prompts)
        ids, lps, reasons = [[] for _ in range(n)], [[] for _ in range(n)], [None] * n
        try:
            while None in reasons:
                d = await handle.queue.get()
                if d.error:
                    self.metrics.count("errors")
                    return render.error_response(400, d.error)
                ids[d.index] += d.token_ids
                lps[d.index] += d.logprobs
                reasons[d.index] = d.finish_reason
        except asyncio.CancelledError:
            self.loop.abort(handle)
            raise
        choices = [self.choice(kind, req, i, ids[i], lps[i], reasons[i], render.decode(self.tok, ids[i])) for i in range(n)]
        obj = "text_completion" if kind == "completion" else "chat.completion"
        usage = render.usage(handle.prompts, ids)
        return JSONResponse(render.envelope(rid, obj, self.model_name, choices, usage=usage, policy_version=self.engine.policy_version))

    async def stream(self, kind: str, req, handle: Handle, rid: str):
        streams: dict[int, render.TextStream] = {}
        obj = "text_completion" if kind == "completion" else "chat.completion.chunk"
        done, finished = 0, False
        try:
            while done < len(handle.prompts):
                d = await handle.queue.get()
                if d.error:
                    self.metrics.count("errors")
                    finished = True
                    yield render.sse({"error": {"message": d.error, "type": "server_error"}})
                    return
                text = streams.setdefault(d.index, render.TextStream(self.tok)).push(d.token_ids, d.finish_reason is not None)
                choice = self.choice(kind, req, d.index, d.token_ids, d.logprobs, d.finish_reason, text, delta=True)
                yield render.sse(render.envelope(rid, obj, self.model_name, [choice]))
                done += d.finish_reason is not None
            finished = True
            yield render.sse("[DONE]")
        finally:
            if not finished:  # the client went away mid-stream: free its sequences
                self.metrics.count("disconnects")
                self.loop.abort(handle)

    def choice(self, kind, req, index, ids, lps, reason, text, delta=False) -> dict:
        """One choice (or stream chunk choice) in the OpenAI shape, plus token_ids if asked."""
        choice = {"index": index, "finish_reason": reason}
        if req.return_token_ids:
            choice["token_ids"] = ids
        if kind == "completion":
            choice["text"] = text
            choice["logprobs"] = render.completion_logprobs(self.tok, ids, lps) if req.logprobs is not None else None
        else:
            message = {"role": "assistant", "content": text}
            if req.tools and not delta:
                message["content"], calls = parse_tool_calls(text)
                if calls:
                    message["tool_calls"], choice["finish_reason"] = calls, "tool_calls"
            choice["delta" if delta else "message"] = message
            choice["logprobs"] = render.chat_logprobs(self.tok, ids, lps) if req.logprobs else None
        return choice


def create_app(engine: PagedEngine, model_name: str) -> FastAPI:
    server = Server(engine, model_name)

    @asynccontextmanager
    async def lifespan(_app):
        server.loop.start()
        yield
        server.loop.stop()

    app = FastAPI(title="posttrain engine", lifespan=lifespan)
    app.state.server = server

    @app.exception_handler(RequestValidationError)
    async def bad_body(_request, exc: RequestValidationError):
        server.metrics.count("errors")
        first = exc.errors()[0] if exc.errors() else {"msg": "invalid request"}
        where = ".".join(str(x) for x in first.get("loc", ()) if x != "body")
        return render.error_response(400, f"{where}: {first['msg']}" if where else first["msg"])

    @app.get("/health")
    async def health():
        return {"status": "ok", "policy_version": engine.policy_version}

    @app.get("/v1/models")
    async def models():
        card = {"id": model_name, "object": "model", "owned_by": "posttrain", "max_model_len": engine.max_model_len}
        return {"object": "list", "data": [card]}

    @app.get("/metrics")
    async def prometheus():
        return PlainTextResponse(server.metrics.render(), media_type="text/plain; version=0.0.4")

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest, request: Request):
        try:
            prompts = prompt_token_lists(req.prompt, server.tok)
        except ValueError as e:
            return render.error_response(400, str(e))
        return await server.serve("completion", req, prompts)

    @app.post("/v1/chat/completions")
    async def chat(req: ChatRequest, request: Request):
        try:
            prompts = [chat_prompt(req.messages, server.tok, req.tools)]
        except ValueError as e:
            return render.error_response(400, str(e))
        return await server.serve("chat", req, prompts)

    return app
