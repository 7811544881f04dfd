"""Which variant serves a request: explicit choice, session pin, routes, key default, canary split.

A session (X-Session-Id header) keeps the variant it first got, so a multi-turn agent never hops
between variants and keeps its prefix cache. Canary traffic is split by a hash of the session id,
so a session is either all-canary or not at all.
"""

from __future__ import annotations

import hashlib
import random
from collections import OrderedDict

from posttrain.gateway.config import GatewayConfig, Key

MAX_PINNED_SESSIONS = 100_000


class RouteError(Exception):
    def __init__(self, status: int, code: str, message: str, param: str | None = None):
        super().__init__(message)
        self.status, self.code, self.param = status, code, param


def unit_hash(text: str) -> float:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") / 2**64


class Router:
    def __init__(self, config: GatewayConfig, canary_share: float | None = None):
        self.config = config
        self.canary = config.canary
        self.canary_share = canary_share if canary_share is not None else (self.canary.share if self.canary else 0.0)
        self.pins: OrderedDict[str, str] = OrderedDict()

    @staticmethod
    def allowed(key: Key | None, variant: str) -> bool:
        return key is None or not key.variants or variant in key.variants

    def choose(self, model: str | None, headers, key: Key | None, prompt_chars: int) -> tuple[str, str]:
        """(variant, how it was chosen), or RouteError for an unknown or forbidden variant."""
        explicit = headers.get("x-posttrain-variant") or (model if model and model != self.config.auto_model else None)
        session = headers.get("x-session-id")
        if explicit:
            if explicit not in self.config.variants:
                raise RouteError(404, "model_not_found", f"The model `{explicit}` does not exist", "model")
            if not self.allowed(key, explicit):
                raise RouteError(403, "model_not_allowed", f"this key may not use `{explicit}`", "model")
            return self._pin(session, explicit), "explicit"
        if session and session in self.pins and self.allowed(key, self.pins[session]):
            self.pins.move_to_end(session)
            return self.pins[session], "session"
        variant, how = self._policy(headers, key, prompt_chars)
        variant, how = self._split(variant, how, session, key)
        return self._pin(session, variant), how

    def _policy(self, headers, key: Key | None, prompt_chars: int) -> tuple[str, str]:
        latency, task = headers.get("x-latency-class"), headers.get("x-task-type")
        for i, r in enumerate(self.config.routes):
            if r.latency_class is not None and r.latency_class != latency:
                continue
            if r.task_type is not None and r.task_type != task:
                continue
            if prompt_chars < r.min_prompt_chars or (r.max_prompt_chars is not None and prompt_chars > r.max_prompt_chars):
                continue
            if self.allowed(key, r.variant):
                return r.variant, f"route{i}"
        default = (key.default_variant if key and key.default_variant else None) or self.config.default_variant
        if self.allowed(key, default):
            return default, "default"
        return key.variants[0], "default"

    def _split(self, variant: str, how: str, session: str | None, key: Key | None) -> tuple[str, str]:
        c = self.canary
        if not c or variant != c.baseline or self.canary_share <= 0 or not self.allowed(key, c.candidate):
            return variant, how
        u = unit_hash(session) if session else random.random()
        return (c.candidate, "canary") if u < self.canary_share else (variant, how)

    def _pin(self, session: str | None, variant: str) -> str:
        if session:
            self.pins[session] = variant
            self.pins.move_to_end(session)
            if len(self.pins) > MAX_PINNED_SESSIONS:
                self.pins.popitem(last=False)
        return variant
