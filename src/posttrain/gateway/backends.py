"""Backends and their health: round-robin within a variant, cooldown after a failure, re-admission
after the cooldown once a health check passes: GET /models answers 200 and lists the model id
the gateway sends (checked for every backend at start)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass

from posttrain.gateway.config import GatewayConfig
from posttrain.gateway.repeatability import listed_dtype
from posttrain.gateway.upstream import Upstream, UpstreamError


@dataclass
class Backend:
    variant: str
    url: str                  # base URL ending in /v1
    model: str                # upstream model id
    auth: dict[str, str]
    cooling_until: float = 0.0
    failures: int = 0
    cooldowns: int = 0
    readmissions: int = 0
    reason: str = ""          # why it is not healthy, as its last probe found
    dtype: str | None = None  # the compute dtype its /models reports (posttrain serve does), if any

    @property
    def healthy(self) -> bool:
        return self.cooling_until == 0.0


class BackendPool:
    def __init__(self, config: GatewayConfig, env: dict[str, str]):
        self.config = config
        self.by_variant: dict[str, list[Backend]] = {}
        for name, v in config.variants.items():
            auth = {"Authorization": f"Bearer {env[v.api_key_env]}"} if v.api_key_env and v.api_key_env in env else {}
            self.by_variant[name] = [Backend(name, u.rstrip("/"), v.model or name, auth) for u in v.backends]
        self.turn = {name: itertools.count() for name in config.variants}

    def all(self) -> list[Backend]:
        return [b for bs in self.by_variant.values() for b in bs]

    def candidates(self, variant: str, allowed) -> list[Backend]:
        """Backends to try in order: this variant's healthy ones (rotated), then its fallback
        variants' healthy ones; cooling ones only if nothing healthy is left."""
        order = [variant] + [f for f in self.config.variants[variant].fallback if allowed(f)]
        healthy, cooling = [], []
        for name in order:
            bs = self.by_variant[name]
            start = next(self.turn[name]) % len(bs)
            for b in bs[start:] + bs[:start]:
                (healthy if b.healthy else cooling).append(b)
        return healthy or cooling

    def failed(self, b: Backend) -> None:
        b.failures += 1
        if b.healthy:
            b.cooldowns += 1
        b.cooling_until = time.monotonic() + self.config.cooldown_s

    def succeeded(self, b: Backend) -> None:
        if not b.healthy and time.monotonic() >= b.cooling_until:
            self._readmit(b)

    def _readmit(self, b: Backend) -> None:
        b.cooling_until = 0.0
        b.reason = ""
        b.readmissions += 1

    async def health_loop(self, client: Upstream) -> None:
        """Probe every backend once (its /models must list its model id), then forever: probe each
        cooling backend whose cooldown has run out."""
        await asyncio.gather(*(self._probe(client, b) for b in self.all()))
        while True:
            await asyncio.sleep(self.config.health_interval_s)
            now = time.monotonic()
            due = [b for b in self.all() if not b.healthy and now >= b.cooling_until]
            await asyncio.gather(*(self._probe(client, b) for b in due))

    async def _probe(self, client: Upstream, b: Backend) -> None:
        b.reason = await self._problem(client, b)
        if not b.reason:
            if not b.healthy:
                self._readmit(b)
        else:
            b.cooling_until = time.monotonic() + self.config.cooldown_s

    async def _problem(self, client: Upstream, b: Backend) -> str:
        """'' when GET /models answers 200 and lists b.model; else why not."""
        try:
            r = await client.request("GET", f"{b.url}/models", headers=b.auth, timeout_s=self.config.connect_timeout_s)
        except (UpstreamError, TimeoutError) as e:
            return f"unreachable: {e}"
        if r.status != 200:
            return f"GET /models answered {r.status}"
        try:
            listed = json.loads(r.body)
            ids = [m["id"] for m in listed["data"]]
        except (ValueError, KeyError, TypeError):
            return ""  # a backend that does not list its models is judged by its replies
        b.dtype = listed_dtype(listed, b.model)
        if b.model not in ids:
            return (f"backend {b.url} does not serve model {b.model!r}; it serves {ids} "
                    f"(set `model` in the variant {b.variant!r})")
        return ""
