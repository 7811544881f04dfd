"""The gateway's HTTP face (FastAPI): the OpenAI endpoints proxied, plus /v1/models, /health, /metrics.

Everything the request path needs is built in the lifespan: one pooled httpx client, the audit
writer, the backend pool with its health loop. Every error answers in the OpenAI shape.
"""

from __future__ import annotations

import asyncio
import json
import os
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from posttrain.gateway.audit import AuditLog
from posttrain.gateway.backends import BackendPool
from posttrain.gateway.config import GatewayConfig
from posttrain.gateway.errors import error_response
from posttrain.gateway.limits import Limiter
from posttrain.gateway.proxy import Gateway
from posttrain.gateway.router import Router


def canary_share_from_audit(audit: AuditLog, config: GatewayConfig) -> float | None:
    """The latest canary decision in the log: promoted sends all baseline traffic to the candidate,
    rolled back sends none; no decision yet keeps the configured share."""
    if not config.canary:
        return None
    row = audit.db.execute("SELECT detail FROM calls WHERE kind = 'canary' AND variant = ? "
                           "ORDER BY id DESC LIMIT 1", (config.canary.candidate,)).fetchone()
    if not row:
        return None
    decision = json.loads(row[0]).get("decision")
    return {"promote": 1.0, "rollback": 0.0}.get(decision)


def build_gateway(config: GatewayConfig) -> Gateway:
    limits = httpx.Limits(max_connections=config.max_connections, max_keepalive_connections=config.max_connections)
    timeout = httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s)
    client = httpx.AsyncClient(limits=limits, timeout=timeout)
    audit = AuditLog(config.audit_db)
    pool = BackendPool(config, dict(os.environ))
    router = Router(config, canary_share_from_audit(audit, config))
    return Gateway(config, pool, router, Limiter(config.keys, audit.spent_by_key()), audit, client)


def create_app(config: GatewayConfig) -> FastAPI:
    holder: dict[str, Gateway] = {}

    @asynccontextmanager
    async def lifespan(app):
        gw = holder["gw"] = app.state.gateway = build_gateway(config)
        health = asyncio.create_task(gw.pool.health_loop(gw.client))
        try:
            yield
        finally:
            health.cancel()
            await gw.client.aclose()
            gw.audit.close()

    app = FastAPI(title="posttrain gateway", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

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

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        return await holder["gw"].handle(request, "/chat/completions")

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await holder["gw"].handle(request, "/completions")

    @app.get("/v1/models")
    async def models(request: Request):
        gw = holder["gw"]
        key = gw.keys.check(request.headers.get("authorization")) if gw.keys.enabled else None
        if gw.keys.enabled and key is None:
            return error_response(401, "Incorrect API key provided", "invalid_api_key")
        names = [config.auto_model] + [v for v in config.variants if gw.router.allowed(key, v)]
        return JSONResponse({"object": "list", "data": [{"id": n, "object": "model", "owned_by": "posttrain-gateway"}
                                                        for n in names]})

    @app.get("/health")
    async def health():
        gw = holder["gw"]
        return {"status": "ok", "backends": {b.url: b.healthy for b in gw.pool.all()}}

    @app.get("/metrics")
    async def metrics():
        return Response(holder["gw"].metrics.render(), media_type="text/plain; version=0.0.4")

    return app
