"""Per-key requests/minute, tokens/minute and spend budgets, reserved at admission.

A request reserves prompt tokens + max_tokens (and their worst-case price) before it is sent
upstream, and the unused part is refunded when it ends, so concurrent streams can never be
granted more than the limit. Windows slide over the last 60 s. Everything runs on the
event loop's thread, so there are no locks.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

from posttrain.gateway.config import Key

WINDOW_S = 60.0


class LimitExceeded(Exception):
    def __init__(self, message: str, code: str, retry_after_s: float | None):
        super().__init__(message)
        self.code = code
        self.retry_after_s = retry_after_s


class SlidingWindow:
    """Amounts granted in the last 60 s; each grant can later be shrunk (a refund)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.grants: deque[list[float]] = deque()  # [granted_at, amount]
        self.total = 0.0

    def _expire(self, now: float) -> None:
        while self.grants and self.grants[0][0] <= now - WINDOW_S:
            self.total -= self.grants.popleft()[1]

    def wait_for(self, amount: float, now: float) -> float | None:
        """0 if `amount` fits now, else seconds until it will, None if it never can."""
        if amount > self.limit:
            return None
        self._expire(now)
        excess = self.total + amount - self.limit
        if excess <= 0:
            return 0.0
        for granted_at, a in self.grants:
            excess -= a
            if excess <= 0:
                return granted_at + WINDOW_S - now
        return WINDOW_S

    def grant(self, amount: float, now: float) -> list[float]:
        entry = [now, amount]
        self.grants.append(entry)
        self.total += amount
        return entry

    def settle(self, entry: list[float], actual: float, now: float) -> None:
        """Replace a grant's reserved amount with what was used (refund or, rarely, top-up)."""
        self._expire(now)
        if entry[0] > now - WINDOW_S:
            self.total += actual - entry[1]
        entry[1] = actual


@dataclass
class KeyState:
    rpm: SlidingWindow | None
    tpm: SlidingWindow | None
    budget_usd: float | None
    spent_usd: float = 0.0
    reserved_usd: float = 0.0


@dataclass
class Admission:
    state: KeyState | None
    tpm_entry: list[float] | None = None
    reserved_usd: float = 0.0
    reserved_tokens: int = 0
    settled: bool = field(default=False)


class Limiter:
    def __init__(self, keys: list[Key], spent_by_key: dict[str, float] | None = None):
        spent_by_key = spent_by_key or {}
        self.states = {
            k.id: KeyState(SlidingWindow(k.rpm) if k.rpm else None, SlidingWindow(k.tpm) if k.tpm else None,
                           k.budget_usd, spent_by_key.get(k.hash[:16], 0.0))
            for k in keys}

    def admit(self, key: Key | None, tokens: int, cost_usd: float, now: float | None = None) -> Admission:
        """Reserve one request, `tokens` tokens and `cost_usd`, or raise LimitExceeded."""
        state = self.states.get(key.id) if key else None
        if state is None:
            return Admission(None)
        now = time.monotonic() if now is None else now
        if state.budget_usd is not None and state.spent_usd + state.reserved_usd + cost_usd > state.budget_usd:
            raise LimitExceeded(f"budget of ${state.budget_usd:.4f} for this key is spent "
                                f"(${state.spent_usd:.4f} used)", "insufficient_quota", None)
        for window, what, amount in ((state.rpm, "requests", 1), (state.tpm, "tokens", tokens)):
            if window is None:
                continue
            wait = window.wait_for(amount, now)
            if wait is None:
                raise LimitExceeded(f"request needs {amount} {what}; the limit is {window.limit}/min",
                                    "request_too_large", None)
            if wait > 0:
                raise LimitExceeded(f"rate limit of {window.limit} {what}/min reached for this key",
                                    "rate_limit_exceeded", wait)
        if state.rpm:
            state.rpm.grant(1, now)
        entry = state.tpm.grant(tokens, now) if state.tpm else None
        state.reserved_usd += cost_usd
        return Admission(state, entry, cost_usd, tokens)

    def settle(self, adm: Admission, tokens: int | None, cost_usd: float | None) -> None:
        """The request ended: charge what it used (its whole reservation if unknown)."""
        if adm.state is None or adm.settled:
            return
        adm.settled = True
        s = adm.state
        s.reserved_usd -= adm.reserved_usd
        s.spent_usd += adm.reserved_usd if cost_usd is None else cost_usd
        if adm.tpm_entry is not None and tokens is not None:
            s.tpm.settle(adm.tpm_entry, tokens, time.monotonic())


def retry_after_header(seconds: float | None) -> dict[str, str]:
    return {} if seconds is None else {"Retry-After": str(max(1, math.ceil(seconds)))}
