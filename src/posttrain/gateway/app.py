"""The gateway's ASGI app: the two completion routes straight to the Gateway, the rest through FastAPI.

Everything the request path needs is built in the lifespan: one pooled upstream client, the audit
writer, the backend pool with its health loop. Every error answers in the OpenAI shape.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request

from posttrain.gateway.audit import AuditLog
from posttrain.gateway.backends import BackendPool
from posttrain.gateway.config import GatewayConfig
from posttrain.gateway.control import SHARE_AFTER, add_control_routes
from posttrain.gateway.limits import Limiter
from posttrain.gateway.proxy import Gateway
from posttrain.gateway.router import Router
from posttrain.gateway.tracing import Tracer
from posttrain.gateway.upstream import Upstream
from posttrain.openai_errors import error_response

COMPLETION_PATHS = {"/v1/chat/completions": "/chat/completions", "/v1/completions": "/completions"}


def canary_share_from_audit(audit: AuditLog, config: GatewayConfig) -> float | None:
    """The latest canary decision in the log: promoted sends all baseline traffic to the candidate,
    rolled back sends none; no decision yet keeps the configured share."""
    if not config.canary:
        return None
    row = audit.db.execute("SELECT detail FROM calls WHERE kind = 'canary' AND variant = ? "
                           "ORDER BY id DESC LIMIT 1", (config.canary.candidate,)).fetchone()
    if not row:
        return None
    return SHARE_AFTER.get(json.loads(row[0]).get("decision"))


def build_gateway(config: GatewayConfig) -> Gateway:
    """Call inside the event loop (the upstream client's connections belong to it)."""
    client = Upstream(config.max_connections, config.connect_timeout_s, config.timeout_s)
    audit = AuditLog(config.audit_db)
    pool = BackendPool(config, dict(os.environ))
    router = Router(config, canary_share_from_audit(audit, config))
    tracer = Tracer(config.otel) if config.otel else None
    return Gateway(config, pool, router, Limiter(config.keys, audit.spent_by_key()), audit, client, tracer)


class CompletionFastPath:
    """ASGI: POSTs to the completion routes go straight to the Gateway; everything else (lifespan,
    control endpoints, unknown paths) to FastAPI. The hot path thus skips FastAPI's middleware
    stack, where a py-spy profile found a large share of the gateway's CPU per request
    (docs/gateway.md, "The hot path")."""

    def __init__(self, app: FastAPI, holder: dict[str, Gateway]):
        self.app, self.holder = app, holder

    async def __call__(self, scope, receive, send) -> None:
        path = COMPLETION_PATHS.get(scope.get("path")) if scope["type"] == "http" else None
        if path is None:
            return await self.app(scope, receive, send)
        if scope["method"] != "POST":
            return await error_response(405, "Method Not Allowed", "method_not_allowed")(scope, receive, send)
        try:
            response = await self.holder["gw"].handle(Request(scope, receive), path)
        except Exception as e:  # noqa: BLE001 - a bug answers 500 in the OpenAI shape, not a traceback
            response = error_response(500, f"internal gateway error ({type(e).__name__})", "internal_error")
        await response(scope, receive, send)


def create_app(config: GatewayConfig) -> CompletionFastPath:
    holder: dict[str, Gateway] = {}

    @asynccontextmanager
    async def lifespan(app):
        gw = holder["gw"] = app.state.gateway = build_gateway(config)
        health = asyncio.create_task(gw.pool.health_loop(gw.client))
        gc.freeze()  # startup's objects leave the collector's generations: no long full collections later
        try:
            yield
        finally:
            health.cancel()
            await gw.client.close_all()
            gw.audit.close()
            if gw.tracer is not None:
                gw.tracer.close()

    app = FastAPI(title="posttrain gateway", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    add_error_handlers(app)
    add_control_routes(app, config, lambda: holder["gw"])
    return CompletionFastPath(app, holder)


def add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(HTTPException)
    async def http_error(_request, exc: HTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        return error_response(exc.status_code, str(exc.detail), code)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request, exc):
        return error_response(400, "invalid request", "invalid_request")

    @app.exception_handler(Exception)
    async def internal(_request, exc: Exception):
        return error_response(500, f"internal gateway error ({type(exc).__name__})", "internal_error")
