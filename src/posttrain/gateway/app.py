"""The gateway's HTTP face (FastAPI): the OpenAI endpoints proxied, plus /v1/models, /health, /metrics.

Everything the request path needs is built in the lifespan: one pooled aiohttp client, the audit
writer, the backend pool with its health loop. Every error answers in the OpenAI shape.
"""

from __future__ import annotations

import asyncio
import json
import os
from contextlib import asynccontextmanager

import aiohttp
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from posttrain.gateway.audit import AuditLog
from posttrain.gateway.backends import BackendPool
from posttrain.gateway.canary import CanaryDecision, audit_fields
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
    """Call inside the event loop. The upstream client is aiohttp, not httpx: at 50 concurrent
    requests httpx 0.28's pool served ~90 req/s here against aiohttp's ~1800 (encode/httpx#3215)."""
    connector = aiohttp.TCPConnector(limit=config.max_connections, limit_per_host=config.max_connections)
    timeout = aiohttp.ClientTimeout(total=config.timeout_s, sock_connect=config.connect_timeout_s)
    client = aiohttp.ClientSession(connector=connector, timeout=timeout)
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
            await gw.client.close()
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

    async def chat(request: Request):
        return await holder["gw"].handle(request, "/chat/completions")

    async def completions(request: Request):
        return await holder["gw"].handle(request, "/completions")

    # Plain Starlette routes: the hot path skips FastAPI's dependency solving (~0.1 ms a call).
    app.add_route("/v1/chat/completions", chat, methods=["POST"])
    app.add_route("/v1/completions", completions, methods=["POST"])

    @app.get("/v1/models")
    async def models(request: Request):
        gw = holder["gw"]
        key = gw.keys.check(request.headers.get("authorization")) if gw.keys.enabled else None
        if gw.keys.enabled and key is None:
            return error_response(401, "Incorrect API key provided", "invalid_api_key")
        names = [config.auto_model] + [v for v in config.variants if gw.router.allowed(key, v)]
        return JSONResponse({"object": "list", "data": [{"id": n, "object": "model", "owned_by": "posttrain-gateway"}
                                                        for n in names]})

    @app.post("/v1/gateway/canary")
    async def canary_decision(request: Request):
        """Apply a canary decision (`posttrain gateway canary` sends it) and append it to the audit log,
        so the log keeps one writer. Needs an admin key when keys are configured."""
        gw = holder["gw"]
        key = gw.keys.check(request.headers.get("authorization")) if gw.keys.enabled else None
        if gw.keys.enabled and (key is None or not key.admin):
            return error_response(403 if key else 401, "an admin key is needed", "admin_only")
        try:
            decision = CanaryDecision(**json.loads(await request.body()))
            if decision.decision not in ("promote", "rollback"):
                raise ValueError(f"decision {decision.decision!r}")
        except (ValueError, TypeError) as e:
            return error_response(400, f"not a canary decision: {e}", "invalid_request")
        if not config.canary or decision.candidate != config.canary.candidate:
            return error_response(400, "the config has no canary for this candidate", "no_canary")
        gw.audit.append(**audit_fields(decision))
        gw.router.canary_share = {"promote": 1.0, "rollback": 0.0}[decision.decision]
        return {"applied": decision.decision, "canary_share": gw.router.canary_share}

    @app.get("/health")
    async def health():
        gw = holder["gw"]
        return {"status": "ok", "backends": {b.url: {"variant": b.variant, "healthy": b.healthy, "failures": b.failures,
                                                     "cooldowns": b.cooldowns, "readmissions": b.readmissions}
                                             for b in gw.pool.all()}}

    @app.get("/metrics")
    async def metrics():
        return Response(holder["gw"].metrics.render(), media_type="text/plain; version=0.0.4")

    return app
