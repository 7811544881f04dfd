"""Request handling over one EngineLoop: plan a request, run it, answer in OpenAI's shape.

A client that goes away (mid-stream, or while waiting for a whole reply) has its sequences
aborted at once. Client mistakes answer 4xx; a failed engine step answers 500.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from fastapi.responses import JSONResponse, Response, StreamingResponse

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.engine import PagedEngine
from posttrain.openai_errors import error_response
from posttrain.serve import render
from posttrain.serve.loop import EngineLoop, Handle
from posttrain.serve.metrics import Metrics
from posttrain.serve.protocol import SamplingFields
from posttrain.serve.text import Detokenizer, TextStream, cut_at_stop
from posttrain.serve.tool_calls import ToolCallStream, parse_tool_calls

DISCONNECTED = object()  # put on a handle's queue when its client went away


@dataclass
class Job:
    """One request, planned: `kind` is "completion" or "chat"; prompts before `n` copies."""

    kind: str
    req: SamplingFields
    prompts: list[list[int]]
    params: SamplingParams | None  # None: echo with max_tokens 0, nothing to generate
    detok: Detokenizer
    top: int  # alternatives to report per token
    scores: list | None = None  # per prompt (logprobs, top alternatives) when echoing

    @property
    def expanded(self) -> list[list[int]]:
        return [p for p in self.prompts for _ in range(self.req.n)]

    @property
    def object(self) -> str:
        return "text_completion" if self.kind == "completion" else "chat.completion"


class Server:
    def __init__(self, engine: PagedEngine, model_name: str):
        self.engine = engine
        self.model_name = model_name
        self.loop = EngineLoop(engine)
        self.metrics = Metrics(engine, self.loop)
        self.tok = engine.tokenizer
        self.eos = getattr(self.tok, "eos_token_id", None) if self.tok is not None else None
        self.detoks = {skip: Detokenizer(self.tok, skip) for skip in (None, True, False)}  # by skip_special_tokens

    def error(self, status: int, message: str, code: str | int | None = None, param: str | None = None) -> Response:
        """An OpenAI error body; code is a string such as "model_not_found", or null."""
        self.metrics.count("errors")
        return error_response(status, message, code, param)

    async def serve(self, kind: str, req: SamplingFields, prompts: list[list[int]], request):
        self.metrics.count(f"requests_{kind}")
        if req.model is not None and req.model != self.model_name:
            return self.error(404, f"The model `{req.model}` does not exist", code="model_not_found", param="model")
        try:
            job = self.plan(kind, req, prompts)
        except ValueError as e:
            return self.error(400, str(e))
        if getattr(req, "echo", False):
            job.scores = [await asyncio.to_thread(self.engine.score, p, job.top) for p in prompts]
        if job.params is None:
            return self.respond(job, [[] for _ in job.expanded], [[] for _ in job.expanded], None, ["length"] * len(job.expanded))
        self.metrics.count("sequences", len(job.expanded))
        handle = self.loop.submit(job.expanded, job.params, stream=bool(req.stream))
        if req.stream:
            return StreamingResponse(self.stream(job, handle), media_type="text/event-stream")
        return await self.collect(job, handle, request)

    def plan(self, kind: str, req: SamplingFields, prompts: list[list[int]]) -> Job:
        """Settle max tokens (chat: the rest of the context by default) and check the request."""
        limit = req.token_limit()
        longest = max(map(len, prompts))
        if limit is None:
            limit = self.engine.max_model_len - longest
            if limit < 1:
                raise ValueError(f"the prompt has {longest} tokens; the context is {self.engine.max_model_len}")
        top = (req.logprobs or 0) if kind == "completion" else (req.top_logprobs or 0) * req.logprobs
        params = req.sampling_params(self.eos, limit, top) if limit > 0 else None
        expanded = [p for p in prompts for _ in range(req.n)]
        self.engine.check_request(expanded, params or SamplingParams(max_tokens=1))
        return Job(kind, req, prompts, params, self.detoks[req.skip_special_tokens], top)

    async def collect(self, job: Job, handle: Handle, request):
        n = len(handle.prompts)
        ids, lps, tops, reasons = [[] for _ in range(n)], [[] for _ in range(n)], [[] for _ in range(n)], [None] * n
        watcher = asyncio.create_task(self._abort_on_disconnect(request, handle))
        try:
            while None in reasons:
                d = await handle.queue.get()
                if d is DISCONNECTED:
                    return Response(status_code=499)  # nobody is listening
                if d.error:
                    return self.error(d.status, d.error)
                ids[d.index] += d.token_ids
                lps[d.index] += d.logprobs
                tops[d.index] += d.top_logprobs
                reasons[d.index] = d.finish_reason
        finally:
            watcher.cancel()
        return self.respond(job, ids, lps, tops, reasons)

    async def _abort_on_disconnect(self, request, handle: Handle) -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        self.metrics.count("disconnects")
        self.loop.abort(handle)
        handle.queue.put_nowait(DISCONNECTED)

    def respond(self, job: Job, ids, lps, tops, reasons) -> JSONResponse:
        choices = []
        for i in range(len(ids)):
            text = cut_at_stop(job.detok.text(ids[i]), job.req.stops)[0]
            choices.append(self.choice(job, i, ids[i], lps[i], tops[i] if tops else [], reasons[i], text))
        completion_tokens = sum(map(len, ids))
        body = render.envelope(render.new_id("cmpl" if job.kind == "completion" else "chatcmpl"), job.object,
                               self.model_name, choices, usage=render.usage(sum(map(len, job.prompts)), completion_tokens),
                               policy_version=self.engine.policy_version)
        return JSONResponse(body)

    async def stream(self, job: Job, handle: Handle):
        rid = render.new_id("cmpl" if job.kind == "completion" else "chatcmpl")
        obj = "text_completion" if job.kind == "completion" else "chat.completion.chunk"
        streams: dict = {}
        extra = {"usage": None} if job.req.include_usage else {}
        generated, done, finished, started = 0, 0, False, set()
        try:
            while done < len(handle.prompts):
                d = await handle.queue.get()
                if d.error:
                    self.metrics.count("errors")
                    finished = True
                    yield render.sse({"error": {"message": d.error, "type": "server_error", "param": None, "code": None}})
                    return
                text, calls = self._stream_text(job, streams, d)
                choice = self.choice(job, d.index, d.token_ids, d.logprobs, d.top_logprobs, d.finish_reason, text, delta=True)
                if calls:
                    choice["delta"]["tool_calls"] = [{"index": k, **c} for k, c in enumerate(calls)]
                    choice["finish_reason"] = "tool_calls"
                if job.kind == "chat" and d.index in started:   # OpenAI: the role in a choice's first delta only
                    choice["delta"].pop("role")
                started.add(d.index)
                yield render.sse(render.envelope(rid, obj, self.model_name, [choice], **extra))
                generated += len(d.token_ids)
                done += d.finish_reason is not None
            if job.req.include_usage:  # OpenAI's last chunk: no choices, the request's usage
                yield render.sse(render.envelope(rid, obj, self.model_name, [], usage=render.usage(sum(map(len, job.prompts)), generated)))
            finished = True
            yield render.sse("[DONE]")
        finally:
            if not finished:  # the client went away mid-stream: free its sequences
                self.metrics.count("disconnects")
                self.loop.abort(handle)

    @staticmethod
    def _stream_text(job: Job, streams: dict, d) -> tuple[str, list[dict]]:
        """This delta's final text, and the tool calls it completes (chat with tools only)."""
        final = d.finish_reason is not None
        if job.kind == "chat" and job.req.active_tools:
            s = streams.setdefault(d.index, ToolCallStream(job.detok, job.req.stops))
            text, calls = s.push(d.token_ids, final)
            return text, (calls if job.req.parallel_tool_calls else calls[:1])
        return streams.setdefault(d.index, TextStream(job.detok, job.req.stops)).push(d.token_ids, final), []

    def choice(self, job: Job, index, ids, lps, tops, reason, text, delta=False) -> dict:
        """One choice (or stream chunk choice) in the OpenAI shape, plus token_ids if asked."""
        req, choice = job.req, {"index": index, "finish_reason": reason}
        if req.return_token_ids:
            choice["token_ids"] = ids
        if job.kind == "completion":
            if job.scores is not None:
                return self._echo_choice(job, choice, ids, lps, tops, text)
            choice["text"] = text
            keep = tops if job.top else None
            choice["logprobs"] = render.completion_logprobs(job.detok, ids, lps, keep) if req.logprobs is not None else None
            return choice
        message = {"role": "assistant", "content": text}
        if req.active_tools and not delta:
            message["content"], calls = parse_tool_calls(text)
            if calls:
                calls = calls if req.parallel_tool_calls else calls[:1]
                message["tool_calls"], choice["finish_reason"] = calls, "tool_calls"
        choice["delta" if delta else "message"] = message
        choice["logprobs"] = render.chat_logprobs(job.detok, ids, lps, tops if job.top else None) if req.logprobs else None
        return choice

    def _echo_choice(self, job: Job, choice: dict, ids, lps, tops, text) -> dict:
        """The prompt, its logprobs (None at the first token) and then the completion."""
        which = choice["index"] // job.req.n
        p, (p_lps, p_tops) = job.prompts[which], job.scores[which]
        if job.req.return_token_ids:
            choice["prompt_token_ids"] = p
        choice["text"] = self.detoks[False].text(p) + text  # the prompt as sent
        if job.req.logprobs is not None:
            all_tops = (p_tops + tops) if job.top else None
            choice["logprobs"] = render.completion_logprobs(job.detok, p + ids, p_lps + lps, all_tops)
        else:
            choice["logprobs"] = None
        return choice
