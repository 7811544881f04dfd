"""A small client for OpenAI-compatible chat completions, with retries and clear errors.

429, 5xx, connection failures and timeouts are retried with exponential backoff (honouring
Retry-After, capped); when retries run out the call raises ModelError. A request the
server rejects as too long raises ContextOverflow. Other 4xx are not retried.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import httpx

from posttrain.errors import PosttrainError

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
OVERFLOW_MARKERS = ("context_length_exceeded", "context length", "maximum context", "too long")


class ModelError(Exception):
    """The endpoint did not give a usable answer (after retries where they apply)."""


class ContextOverflow(ModelError):
    """The conversation no longer fits the model's context."""


@dataclass
class ChatReply:
    message: dict            # the assistant message as returned (content, tool_calls)
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    retries: int = 0


@dataclass
class RetryPolicy:
    max_retries: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    jitter: float = 0.25

    def delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(self.max_delay_s, max(0.0, float(retry_after)))
            except ValueError:
                pass
        d = min(self.max_delay_s, self.base_delay_s * 2**attempt)
        return d * (1 + self.jitter * random.random())


@dataclass
class ChatClient:
    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 120.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_connections: int = 64

    def __post_init__(self):
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        limits = httpx.Limits(max_connections=self.max_connections)
        self._http = httpx.Client(base_url=self.base_url.rstrip("/") + "/", headers=headers,
                                  timeout=self.timeout_s, limits=limits)

    def close(self) -> None:
        self._http.close()

    def check_reachable(self) -> None:
        """Fail fast, before any trial runs, if nothing answers at base_url."""
        try:
            self._http.get("models", timeout=min(10.0, self.timeout_s))
        except httpx.HTTPError as e:
            raise PosttrainError(f"cannot reach the model endpoint {self.base_url}: "
                                 f"{type(e).__name__}: {e}") from None

    def check_serves(self) -> None:
        """Fail fast if the endpoint does not list self.model at /models."""
        try:
            r = self._http.get("models", timeout=min(10.0, self.timeout_s))
            ids = [m["id"] for m in r.json()["data"]]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as e:
            raise PosttrainError(f"{self.base_url}/models lists no models: {type(e).__name__}: {e}") from None
        if self.model not in ids:
            raise PosttrainError(f"{self.base_url} does not serve {self.model!r} (it serves {', '.join(ids)});"
                                 " pass --served-model with one of those ids")

    def chat(self, messages: list[dict], tools: list[dict], deadline: float | None = None,
             **sampling) -> ChatReply:
        """One completion; no request or backoff sleep runs past `deadline` (perf_counter)."""
        body = {"model": self.model, "messages": messages, "tools": tools,
                "tool_choice": "auto", **{k: v for k, v in sampling.items() if v is not None}}
        t0 = time.perf_counter()
        for attempt in range(self.retry.max_retries + 1):
            last = attempt == self.retry.max_retries
            try:
                r = self._http.post("chat/completions", json=body, timeout=_left(deadline, self.timeout_s))
            except httpx.TransportError as e:  # connect, read timeout, protocol errors
                if last:
                    raise ModelError(f"endpoint failed after {attempt + 1} tries: "
                                     f"{type(e).__name__}: {e}") from None
                _sleep(self.retry.delay(attempt, None), deadline)
                continue
            if r.status_code in RETRY_STATUS and not last:
                _sleep(self.retry.delay(attempt, r.headers.get("retry-after")), deadline)
                continue
            return _parse(r, time.perf_counter() - t0, attempt)
        raise AssertionError("unreachable")


def _left(deadline: float | None, cap: float) -> float:
    if deadline is None:
        return cap
    left = deadline - time.perf_counter()
    if left <= 0:
        raise ModelError("time ran out waiting for the endpoint")
    return min(cap, left)


def _sleep(seconds: float, deadline: float | None) -> None:
    time.sleep(seconds if deadline is None else max(0.0, min(seconds, _left(deadline, seconds))))


def _parse(r: httpx.Response, latency: float, retries: int) -> ChatReply:
    if r.status_code != 200:
        text = r.text[:300]
        if r.status_code == 400 and any(m in text.lower() for m in OVERFLOW_MARKERS):
            raise ContextOverflow(f"HTTP 400: {text}")
        tries = f" after {retries + 1} tries" if retries else ""
        raise ModelError(f"HTTP {r.status_code}{tries}: {text}")
    try:
        data = r.json()
        choice = data["choices"][0]
        message = choice["message"]
        usage = data.get("usage") or {}
    except (ValueError, KeyError, IndexError, TypeError):
        raise ModelError(f"malformed response: {r.text[:300]}") from None
    if not isinstance(message, dict):
        raise ModelError(f"malformed response message: {message!r}")
    return ChatReply(message, choice.get("finish_reason") or "stop",
                     int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                     latency, retries)
