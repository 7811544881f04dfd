"""JSON over HTTP to an engine server: one retry on a transport fault, and every failure
(unreachable, 4xx/5xx, malformed JSON) as an EngineError that carries the server's message."""

from __future__ import annotations

import httpx

from posttrain.errors import EngineError


def _server_message(r: httpx.Response) -> str:
    try:
        body = r.json()
    except ValueError:
        return r.text[:300]
    if isinstance(body, dict):
        err = body.get("error", body.get("detail", body.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        if err is not None:
            return str(err)[:300]
    return str(body)[:300]


class JSONClient:
    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 600.0):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self.http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    def call(self, method: str, path: str, body: dict | None = None, timeout: float | None = None,
             params: dict | None = None) -> dict | list | None:
        """The parsed JSON answer (None for an empty 200). A transport fault (refused, reset,
        timed out) is retried once; a server that answered is never retried."""
        kw = {"json": body, "params": params} | ({"timeout": timeout} if timeout else {})
        for attempt in (0, 1):
            try:
                r = self.http.request(method, path, **kw)
                break
            except httpx.TransportError as e:
                if attempt == 1:
                    raise EngineError(f"cannot reach {self.base_url}{path}: {type(e).__name__}: {e}") from e
        if r.status_code >= 400:
            raise EngineError(f"{self.base_url}{path} answered {r.status_code}: {_server_message(r)}")
        if not r.content:
            return None
        try:
            return r.json()
        except ValueError as e:
            raise EngineError(f"{self.base_url}{path} answered malformed JSON: {r.text[:200]!r}") from e

    def close(self) -> None:
        self.http.close()
