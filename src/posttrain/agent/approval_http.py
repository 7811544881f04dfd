"""A reviewer over HTTP, for a UI: pending approvals are listed and answered on a small server.

    GET  /approvals          {"pending": [{"id", "task_id", "group_id", "slot", "turn",
                                           "command", "rule", "waiting_s"}, ...]}
    POST /approvals/{id}     {"allow": true|false, "reason": "..."}  -> 200, or 404 if not pending

FastAPI on uvicorn in a thread of its own. It binds 127.0.0.1 unless told otherwise, and a
server bound elsewhere refuses to start without a token, then wants `Authorization: Bearer
TOKEN` on every request. A request nobody answers within timeout_s is denied, and says so.
"""

from __future__ import annotations

import hmac
import ipaddress
import itertools
import socket
import threading
import time
from dataclasses import dataclass, field

from fastapi import Depends, FastAPI, HTTPException, Request
from pydantic import BaseModel

from posttrain.agent.approval import ApprovalRequest, Decision
from posttrain.errors import ConfigError


class Verdict(BaseModel):
    allow: bool
    reason: str = ""


@dataclass
class _Pending:
    request: ApprovalRequest
    since: float = field(default_factory=time.time)
    answered: threading.Event = field(default_factory=threading.Event)
    decision: Decision | None = None


def is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class HttpApprover:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                 timeout_s: float = 600.0):
        if not is_loopback(host) and not token:
            raise ConfigError(f"refusing to serve approvals on {host} without a token "
                              "(set one, or bind 127.0.0.1)")
        self.token, self.timeout_s = token, timeout_s
        self.pending: dict[str, _Pending] = {}
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:            # bound here, so a busy port fails before any episode starts
            self.sock = socket.create_server((host, port), family=family)
        except OSError as e:
            raise ConfigError(f"cannot serve approvals on {host}:{port}: {e.strerror}") from e
        self.host, self.port = host, self.sock.getsockname()[1]
        self.server = None
        self.closed = ""        # once closed: why requests are no longer asked

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/approvals"

    def start(self) -> "HttpApprover":
        import uvicorn

        config = uvicorn.Config(self.app(), log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="approvals-http", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise ConfigError(f"the approval server on {self.host}:{self.port} did not start")
            time.sleep(0.01)
        return self

    def cancel(self, reason: str = "the run ended before an answer") -> None:
        """Deny the requests waiting now."""
        with self.lock:
            for p in self.pending.values():
                if p.decision is None:
                    p.decision = Decision(False, reason, "cancelled")
                    p.answered.set()

    def close(self) -> None:
        """Stop serving; what waits now, and anything asked later, is denied."""
        with self.lock:
            self.closed = "the approval server closed"
        self.cancel(self.closed)
        if self.server is not None:
            self.server.should_exit = True
            self.thread.join(timeout=10)
        self.sock.close()

    def decide(self, request: ApprovalRequest) -> Decision:
        with self.lock:
            if self.closed:
                return Decision(False, self.closed, "cancelled")
            key = str(next(self.ids))
            self.pending[key] = pending = _Pending(request)
        answered = pending.answered.wait(self.timeout_s)
        with self.lock:
            self.pending.pop(key, None)
            if answered and pending.decision is not None:
                return pending.decision
        return Decision(False, f"no reviewer answered within {self.timeout_s:g} s", "timeout")

    def answer(self, key: str, verdict: Verdict) -> bool:
        """Settle a pending request; False if it is not pending (answered, timed out, unknown)."""
        with self.lock:
            pending = self.pending.get(key)
            if pending is None or pending.decision is not None:
                return False
            pending.decision = Decision(verdict.allow, verdict.reason, "http")
            pending.answered.set()
            return True

    def listing(self) -> list[dict]:
        now = time.time()
        with self.lock:
            return [{"id": key, **p.request.to_dict(), "waiting_s": round(now - p.since, 3)}
                    for key, p in self.pending.items() if p.decision is None]

    def app(self) -> FastAPI:
        def check_token(request: Request) -> None:
            if self.token is None:
                return
            given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                raise HTTPException(401, "a wrong or missing bearer token")

        app = FastAPI(title="posttrain approvals", dependencies=[Depends(check_token)])

        @app.get("/approvals")
        def pending() -> dict:
            return {"pending": self.listing()}

        @app.post("/approvals/{key}")
        def decide(key: str, verdict: Verdict) -> dict:
            if not self.answer(key, verdict):
                raise HTTPException(404, f"approval {key} is not pending (answered, timed out or unknown)")
            return {"id": key, "allow": verdict.allow}

        return app
