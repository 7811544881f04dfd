"""The OpenAI-compatible HTTP face of the engine (FastAPI).

/v1/completions (text or token-id prompts), /v1/chat/completions, both with streaming and
logprobs; /v1/models, /health and Prometheus /metrics. Bad input answers 400 with an OpenAI
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
from posttrain.serve.loop import EngineLoop
from posttrain.serve.metrics import Metrics
from posttrain.serve.protocol import ChatRequest, CompletionRequest, chat_prompt, prompt_token_lists


def create_app(engine: PagedEngine, model_name: str) -> FastAPI:
    loop = EngineLoop(engine)
    metrics = Metrics(engine, loop)
    tok = engine.tokenizer
    eos = getattr(tok, "eos_token_id", None) if tok is not None else None

    @asynccontextmanager
    async def lifespan(_app):
        loop.start()
        yield
        loop.stop()

    app = FastAPI(title="posttrain engine", lifespan=lifespan)

    @app.exception_handler(RequestValidationError)
    async def bad_body(_request, exc: RequestValidationError):
        metrics.count("errors")
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
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest, request: Request):
        try:
            prompts = prompt_token_lists(req.prompt, tok)
        except ValueError as e:
            return render.error_response(400, str(e))
        return await _serve("completion", req, prompts, request)

    @app.post("/v1/chat/completions")
    async def chat(req: ChatRequest, request: Request):
        try:
            prompts = [chat_prompt(req.messages, tok)]
        except ValueError as e:
            return render.error_response(400, str(e))
        return await _serve("chat", req, prompts, request)

    async def _serve(kind: str, req, prompts: list[list[int]], request: Request):
        metrics.count(f"requests_{kind}")
        expanded = [p for p in prompts for _ in range(req.n)]
        try:
            params = req.sampling_params(eos)
            engine.check_request(expanded, params)
        except ValueError as e:
            metrics.count("errors")
            return render.error_response(400, str(e))
        handle = loop.submit(expanded, params)
        rid = render.new_id("cmpl" if kind == "completion" else "chatcmpl")
        if req.stream:
            return StreamingResponse(_stream(kind, req, handle, rid), media_type="text/event-stream")
        return await _collect(kind, req, handle, rid, expanded)

    async def _collect(kind, req, handle, rid, prompts):
        n = len(prompts)
        ids, lps, reasons = [[] for _ in range(n)], [[] for _ in range(n)], [None] * n
        try:
            while None in reasons:
                d = await handle.queue.get()
                if d.error:
                    metrics.count("errors")
                    return render.error_response(400 if d.finish_reason == "error" else 500, d.error)
                ids[d.index] += d.token_ids
                lps[d.index] += d.logprobs
                reasons[d.index] = d.finish_reason
        except asyncio.CancelledError:
            loop.abort(handle)
            raise
        choices = [_choice(kind, req, i, ids[i], lps[i], reasons[i]) for i in range(n)]
        obj = "text_completion" if kind == "completion" else "chat.completion"
        body = render.envelope(rid, obj, model_name, choices, usage=render.usage(prompts, ids), policy_version=engine.policy_version)
        return JSONResponse(body)

    def _choice(kind, req, i, ids, lps, reason) -> dict:
        text = render.decode(tok, ids)
        choice = {"index": i, "finish_reason": reason}
        if req.return_token_ids:
            choice["token_ids"] = ids
        if kind == "completion":
            choice["text"] = text
            choice["logprobs"] = render.completion_logprobs(tok, ids, lps) if req.logprobs is not None else None
        else:
            choice["message"] = {"role": "assistant", "content": text}
            choice["logprobs"] = render.chat_logprobs(tok, ids, lps) if req.logprobs else None
        return choice

    async def _stream(kind, req, handle, rid):
        streams = {}
        obj = "text_completion" if kind == "completion" else "chat.completion.chunk"
        done, finished = 0, False
        try:
            while done < len(handle.prompts):
                d = await handle.queue.get()
                if d.error:
                    metrics.count("errors")
                    yield render.sse({"error": {"message": d.error, "type": "server_error"}})
                    finished = True
                    break
                text = streams.setdefault(d.index, render.TextStream(tok)).push(d.token_ids, d.finish_reason is not None)
                choice = _chunk_choice(kind, req, d, text)
                yield render.sse(render.envelope(rid, obj, model_name, [choice]))
                done += d.finish_reason is not None
            finished = True
            yield render.sse("[DONE]")
        finally:
            if not finished:  # the client went away mid-stream: free its sequences
                metrics.count("disconnects")
                loop.abort(handle)

    def _chunk_choice(kind, req, d, text) -> dict:
        choice = {"index": d.index, "finish_reason": d.finish_reason}
        if req.return_token_ids:
            choice["token_ids"] = d.token_ids
        if kind == "completion":
            choice["text"] = text
            choice["logprobs"] = render.completion_logprobs(tok, d.token_ids, d.logprobs) if req.logprobs is not None else None
        else:
            choice["delta"] = {"role": "assistant", "content": text}
            choice["logprobs"] = render.chat_logprobs(tok, d.token_ids, d.logprobs) if req.logprobs else None
        return choice

    return app
