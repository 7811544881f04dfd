"""Which failures of an episode are retried, and how.

Three classes, told apart by what raised:
- engine:  EngineError (a server restarting, a timeout, a refused connection, a 5xx). The
           generate call is retried; the episode's state is intact.
- sandbox: SandboxError or OSError from exec (the backend died or is unreachable). The exec
           is retried; a backend that restarts itself (bwrap's runner) recovers.
- tool:    a command that ran and failed. That is an observation for the model, never
           raised, never retried.
Engine and sandbox faults are retried with exponential backoff up to `retries` times, then
the episode ends as infra_error with the class in its error: never verified, never a reward.
Anything else raised is a bug and propagates.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal, TypeVar

from posttrain.errors import EngineError, SandboxError

FaultClass = Literal["engine", "sandbox"]
T = TypeVar("T")


class EpisodeFault(Exception):
    """An engine or sandbox fault that outlived its retries."""

    def __init__(self, kind: FaultClass, attempts: int, cause: BaseException):
        super().__init__(f"{kind} error after {attempts} attempts: {type(cause).__name__}: {cause}")
        self.kind, self.attempts = kind, attempts


def fault_class(e: BaseException) -> FaultClass | None:
    """The retryable class of an exception; None for one that is not retried."""
    if isinstance(e, EngineError):
        return "engine"
    if isinstance(e, (SandboxError, OSError)):
        return "sandbox"
    return None


def backoff_s(attempt: int, base_s: float, max_s: float) -> float:
    """Seconds to wait before retry `attempt` (1-based): base * 2^(attempt-1), capped."""
    return min(max_s, base_s * 2 ** (attempt - 1))


def with_retries(fn: Callable[[], T], kind: FaultClass, retries: int, base_s: float, max_s: float,
                 on_retry: Callable[[], None] = lambda: None, sleep=time.sleep) -> T:
    """fn(), retried on a fault of `kind`; EpisodeFault once `retries` retries have failed."""
    for attempt in range(retries + 1):
        try:
            return fn()
        except Exception as e:
            if fault_class(e) != kind:
                raise
            if attempt == retries:
                raise EpisodeFault(kind, attempt + 1, e) from e
            on_retry()
            sleep(backoff_s(attempt + 1, base_s, max_s))
    raise AssertionError("unreachable")
