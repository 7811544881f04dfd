"""The request path: authenticate, route, reserve limits, forward with fallback, audit, measure."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from posttrain.gateway.audit import AuditLog
from posttrain.gateway.backends import Backend, BackendPool
from posttrain.gateway.config import GatewayConfig, Key
from posttrain.gateway.keys import KeyRing, key_label
from posttrain.gateway.limits import Admission, LimitExceeded, Limiter, retry_after_header
from posttrain.gateway.metrics import GatewayMetrics
from posttrain.gateway.router import RouteError, Router
from posttrain.gateway.shape import BadShape, check_shape
from posttrain.gateway.tracing import Tracer
from posttrain.gateway.tokens import StreamCounter, prompt_upper_bound, usage_of
from posttrain.gateway.upstream import Reply, Upstream, UpstreamError
from posttrain.openai_errors import error_response

# Connection errors, resets, timeouts, truncated bodies: another backend may do better.
RETRYABLE = (UpstreamError, TimeoutError)


@dataclass
class Call:
    """What one request carries from admission to its audit row."""

    t0: float
    path: str
    key: Key | None
    variant: str
    route: str
    body: dict
    raw: bytes
    admission: Admission
    reserved_in: int
    session: str | None


async def read_capped(request: Request, limit: int) -> bytes | None:
    """The request body, or None as soon as it grows past `limit` bytes (never buffers more)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


class Gateway:
    def __init__(self, config: GatewayConfig, pool: BackendPool, router: Router, limiter: Limiter,
                 audit: AuditLog, client: Upstream, tracer: Tracer | None = None):
        self.config, self.pool, self.router, self.limiter = config, pool, router, limiter
        self.audit, self.client, self.tracer = audit, client, tracer
        self.keys = KeyRing(config.keys)
        self.metrics = GatewayMetrics(pool)

    async def handle(self, request: Request, path: str) -> Response:
        t0 = time.perf_counter()
        size = request.headers.get("content-length")
        if size and size.isdigit() and int(size) > self.config.max_body_bytes:
            return self._reject(t0, path, None, 413, f"request body over {self.config.max_body_bytes} bytes", "body_too_large")
        key = self.keys.check(request.headers.get("authorization")) if self.keys.enabled else None
        if self.keys.enabled and key is None:
            return self._reject(t0, path, None, 401, "Incorrect API key provided", "invalid_api_key")
        raw = await read_capped(request, self.config.max_body_bytes)
        if raw is None:  # chunked, or a content-length that lied
            return self._reject(t0, path, key, 413, f"request body over {self.config.max_body_bytes} bytes", "body_too_large")
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
        except ValueError as e:
            return self._reject(t0, path, key, 400, f"We could not parse the JSON body of your request: {e}", "invalid_json")
        try:
            check_shape(body)
        except BadShape as e:
            return self._reject(t0, path, key, 400, str(e), "invalid_request", e.param)
        try:
            call = self._admit(t0, path, key, body, raw, request.headers)
        except RouteError as e:
            return self._reject(t0, path, key, e.status, str(e), e.code, e.param)
        except LimitExceeded as e:
            return self._reject(t0, path, key, 429, str(e), e.code, headers=retry_after_header(e.retry_after_s))
        try:
            return await (self._stream(call) if body.get("stream") else self._forward(call))
        except BaseException:  # a bug or a client gone mid-call: free the reservation, then fail
            self.limiter.settle(call.admission, 0, 0.0)
            raise

    def _reject(self, t0, path, key, status, message, code, param=None, headers=None) -> Response:
        """Refused before any upstream call: still one audit row and one metric sample."""
        label = key_label(key) if key or not self.keys.enabled else "invalid"
        latency = time.perf_counter() - t0
        self._record(latency, kind="rejected", key_hash=label, route=path, status=status, latency_ms=latency * 1000,
                     tokens_in=0, tokens_out=0, detail=code)
        self.metrics.observe("none", status, label, latency, 0, 0)
        return error_response(status, message, code, param, headers)

    def _admit(self, t0, path, key, body, raw, headers) -> Call:
        bound, chars = prompt_upper_bound(body)
        variant, route = self.router.choose(body.get("model"), headers, key, chars)
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        if not isinstance(max_tokens, int) or max_tokens <= 0:
            max_tokens = self.config.default_max_tokens
            body["max_tokens"] = max_tokens  # the reservation must bound what the upstream may emit
            raw = b""  # re-serialise before sending
        n = body.get("n") if isinstance(body.get("n"), int) and body.get("n") > 0 else 1
        reserved = bound + n * max_tokens
        cost = self.config.variants[variant].price.cost(bound, n * max_tokens)
        admission = self.limiter.admit(key, reserved, cost)
        return Call(t0, path, key, variant, route, body, raw, admission, bound, headers.get("x-session-id"))

    def _payload(self, call: Call, b: Backend) -> bytes:
        if call.raw and call.body.get("model") == b.model:
            return call.raw
        call.body["model"] = b.model
        call.raw = json.dumps(call.body).encode()
        return call.raw

    @staticmethod
    def _payload_text(call: Call) -> str:
        return call.raw.decode("utf-8", "replace") if call.raw else json.dumps(call.body)

    def _headers(self, b: Backend) -> dict[str, str]:
        return {"content-type": "application/json", **b.auth}

    async def _forward(self, call: Call) -> Response:
        tried = self.pool.candidates(call.variant, lambda v: self.router.allowed(call.key, v))
        for b in tried:
            try:
                r = await self.client.request("POST", f"{b.url}{call.path}", self._payload(call, b), self._headers(b))
                status, content = r.status, r.body
            except RETRYABLE as e:
                self._upstream_failed(b, type(e).__name__)
                continue
            if status >= 500:
                self._upstream_failed(b, f"HTTP {status}")
                continue
            self.pool.succeeded(b)
            tin, tout, text = usage_of(content) if status == 200 else (0, 0, None)
            self._finish(call, b, status, tin, tout, text)
            return Response(content, status_code=status, media_type="application/json",
                            headers={"x-posttrain-variant": b.variant})
        self._finish(call, None, 502, 0, 0, None)
        return error_response(502, f"every backend for `{call.variant}` failed ({len(tried)} tried)", "upstream_unavailable")

    def _upstream_failed(self, b: Backend, why: str) -> None:
        self.pool.failed(b)
        self.metrics.retries.labels(b.url).inc()

    async def _stream(self, call: Call) -> Response:
        """Fail over only before the first byte; after it, relay what the backend sends."""
        tried = self.pool.candidates(call.variant, lambda v: self.router.allowed(call.key, v))
        for b in tried:
            r = None
            try:
                r = await self.client.request("POST", f"{b.url}{call.path}", self._payload(call, b),
                                              self._headers(b), stream=True)
                if r.status != 200:
                    content = await self._drain(r)
                    if r.status >= 500:
                        self._upstream_failed(b, f"HTTP {r.status}")
                        continue
                    self._finish(call, b, r.status, 0, 0, None)
                    return Response(content, status_code=r.status, media_type="application/json")
                first = await self._next_chunk(r)
                if not first:
                    raise UpstreamError("empty stream")
            except RETRYABLE as e:
                self.client.close(r)
                self._upstream_failed(b, type(e).__name__)
                continue
            self.pool.succeeded(b)
            return StreamingResponse(self._relay(call, b, r, first), media_type="text/event-stream",
                                     headers={"x-posttrain-variant": b.variant})
        self._finish(call, None, 502, 0, 0, None)
        return error_response(502, f"every backend for `{call.variant}` failed ({len(tried)} tried)", "upstream_unavailable")

    async def _next_chunk(self, r: Reply) -> bytes | None:
        """The next piece of a streamed body, None at its end; raises what broke the stream."""
        async with asyncio.timeout(self.config.timeout_s):
            chunk = await r.chunks.get()
        if isinstance(chunk, BaseException):
            raise chunk
        return chunk

    async def _drain(self, r: Reply) -> bytes:
        parts = []
        while (chunk := await self._next_chunk(r)) is not None:
            parts.append(chunk)
        return b"".join(parts)

    async def _relay(self, call: Call, b: Backend, r: Reply, first: bytes):
        counter, status = StreamCounter(), 200
        try:
            counter.feed(first)
            yield first
            while (chunk := await self._next_chunk(r)) is not None:
                counter.feed(chunk)
                yield chunk
        except RETRYABLE:
            status = 502  # the backend died mid-stream: the client sees the stream end early
            yield b'data: {"error": {"message": "upstream failed mid-stream", "type": "server_error", "code": "upstream_unavailable"}}\n\n'
        finally:
            self.client.close(r)  # also aborts the upstream generation if the client went away
            tin, tout, text = counter.result()
            self._finish(call, b, status, tin, tout, text)

    def _finish(self, call: Call, b: Backend | None, status: int, tin, tout, text) -> None:
        """Settle the key's reservation, write the audit row, observe the metrics."""
        latency = time.perf_counter() - call.t0
        tin = call.reserved_in if tin is None and status == 200 else (tin or 0)
        tokens = None if tout is None else tin + tout
        v = self.config.variants[b.variant if b else call.variant]
        cost = v.price.cost(tin, tout or 0) if tout is not None else None
        self.limiter.settle(call.admission, tokens if status == 200 else 0, cost if status == 200 else 0.0)
        label = key_label(call.key)
        body = call.body
        self._record(latency, kind="call", key_hash=label, route=f"{call.path} {call.route}",
                     variant=b.variant if b else call.variant, backend=b.url if b else None,
                     weights_version=v.weights_version, seed=body.get("seed"), tokens_in=tin, tokens_out=tout or 0,
                     latency_ms=latency * 1000, status=status, cost_usd=cost, session=call.session,
                     request=self._payload_text(call) if self.config.audit_bodies else None, output=text)
        self.metrics.observe(b.variant if b else call.variant, status, label, latency, tin, tout or 0)

    def _record(self, latency_s: float, **fields) -> None:
        """One audit row, and one span when OpenTelemetry is on."""
        self.audit.append(**fields)
        if self.tracer is not None:
            self.tracer.record(f"gateway {fields['kind']}", latency_s, fields)
