"""The gateway's control-plane endpoints (FastAPI): /v1/models, /v1/gateway/canary, /health, /metrics."""

from __future__ import annotations

import json
from typing import Callable

from fastapi import FastAPI, Request
from starlette.responses import JSONResponse, Response

from posttrain.gateway.canary import CanaryDecision, audit_fields
from posttrain.gateway.config import GatewayConfig
from posttrain.gateway.proxy import Gateway
from posttrain.openai_errors import error_response

SHARE_AFTER = {"promote": 1.0, "rollback": 0.0}


def add_control_routes(app: FastAPI, config: GatewayConfig, gateway: Callable[[], Gateway]) -> None:
    """`gateway()` returns the Gateway the lifespan built (it does not exist before startup)."""

    @app.get("/v1/models")
    async def models(request: Request):
        return list_models(gateway(), config, request.headers.get("authorization"))

    @app.post("/v1/gateway/canary")
    async def canary_decision(request: Request):
        return apply_canary(gateway(), config, request.headers.get("authorization"), await request.body())

    @app.get("/health")
    async def health():
        return {"status": "ok", "backends": {b.url: {"variant": b.variant, "healthy": b.healthy, "failures": b.failures,
                                                     "cooldowns": b.cooldowns, "readmissions": b.readmissions,
                                                     "reason": b.reason, "dtype": b.dtype}
                                             for b in gateway().pool.all()}}

    @app.get("/metrics")
    async def metrics():
        return Response(gateway().metrics.render(), media_type="text/plain; version=0.0.4")


def list_models(gw: Gateway, config: GatewayConfig, authorization: str | None) -> Response:
    key = gw.keys.check(authorization) if gw.keys.enabled else None
    if gw.keys.enabled and key is None:
        return error_response(401, "Incorrect API key provided", "invalid_api_key")
    names = [config.auto_model] + [v for v in config.variants if gw.router.allowed(key, v)]
    return JSONResponse({"object": "list", "data": [{"id": n, "object": "model", "owned_by": "posttrain-gateway"}
                                                    for n in names]})


def apply_canary(gw: Gateway, config: GatewayConfig, authorization: str | None, raw: bytes) -> Response:
    """Apply a canary decision (`posttrain gateway canary` sends it) and append it to the audit log,
    so the log keeps one writer. Needs an admin key when keys are configured."""
    key = gw.keys.check(authorization) if gw.keys.enabled else None
    if gw.keys.enabled and (key is None or not key.admin):
        return error_response(403 if key else 401, "an admin key is needed", "admin_only")
    try:
        decision = CanaryDecision(**json.loads(raw))
        if decision.decision not in SHARE_AFTER:
            raise ValueError(f"decision {decision.decision!r}")
    except (ValueError, TypeError) as e:
        return error_response(400, f"not a canary decision: {e}", "invalid_request")
    if not config.canary or decision.candidate != config.canary.candidate:
        return error_response(400, "the config has no canary for this candidate", "no_canary")
    gw.audit.append(**audit_fields(decision))
    gw.router.canary_share = SHARE_AFTER[decision.decision]
    return JSONResponse({"applied": decision.decision, "canary_share": gw.router.canary_share})
