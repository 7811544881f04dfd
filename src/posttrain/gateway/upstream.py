"""The upstream HTTP/1.1 client of the request path: keep-alive connections per backend, responses
parsed by httptools (llhttp, the parser uvicorn uses), streamed or whole.

It replaces aiohttp on the request path. In a py-spy profile of the gateway at 100 req/s, aiohttp's
request machinery (yarl URLs, multidicts, tracing hooks, its stream reader) was the largest single
cost, about a fifth of the gateway's CPU per request; this client writes a request in one `write`
and parses the reply in C. It speaks only what the gateway needs: POST and GET with a byte body,
Content-Length or chunked replies, http and https. A request on a reused connection that the server
had closed before answering is sent once more on a fresh connection (nothing of it was processed:
the server closed an idle connection, see RFC 9112 §9.3.1); every other failure raises.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from dataclasses import dataclass
from urllib.parse import urlsplit

import httptools


class UpstreamError(ConnectionError):
    """The backend could not be reached, closed the connection or sent a malformed reply."""


@dataclass
class Reply:
    status: int  # the reply's headers are not kept: the gateway answers with its own
    chunks: asyncio.Queue | None = None  # streaming: body pieces, then None (or an exception)
    body: bytes = b""
    conn: "Connection | None" = None


class Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time."""

    def __init__(self, on_end):
        self.on_end, self.transport, self.parser = on_end, None, httptools.HttpResponseParser(self)
        self.reply: Reply | None = None
        self.headers_done: asyncio.Future | None = None
        self.done: asyncio.Future | None = None
        self.stream, self.parts, self.got_bytes, self.closed = False, [], False, False

    # --- asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.done is None:  # bytes nobody asked for: the connection cannot be trusted again
            self.closed = True
            self.transport.close()
            return
        self.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self.closed = True
            self.transport.close()
            self._fail(UpstreamError(f"malformed reply: {e}"))

    def connection_lost(self, exc) -> None:
        self.closed = True
        self._fail(UpstreamError("connection closed before the reply ended"))

    # --- httptools callbacks
    def on_headers_complete(self) -> None:
        self.reply.status = self.parser.get_status_code()
        if self.stream:
            self.reply.chunks = asyncio.Queue()
        self.headers_done.set_result(self.reply)

    def on_body(self, body: bytes) -> None:
        if self.stream:
            self.reply.chunks.put_nowait(body)
        else:
            self.parts.append(body)

    def on_message_complete(self) -> None:
        reply, done = self.reply, self.done
        reply.body = b"".join(self.parts)
        if self.stream:
            reply.chunks.put_nowait(None)
        self.reply, self.done, self.parts = None, None, []
        reusable = self.parser.should_keep_alive() and not self.closed
        if not reusable:
            self.transport.close()
        done.set_result(reply)
        self.on_end(self, reusable)

    def _fail(self, exc: Exception) -> None:
        if self.done is None:  # already ended (a parser error, then the connection's loss)
            return
        for fut in (self.headers_done, self.done):
            if fut is not None and not fut.done():
                fut.set_exception(exc)
                fut.exception()  # retrieved: a caller gone before the failure leaves no warning
        if self.stream and self.reply is not None and self.reply.chunks is not None:
            self.reply.chunks.put_nowait(exc)
        self.reply, self.done = None, None
        self.on_end(self, False)

    def send(self, head: bytes, body: bytes, stream: bool) -> None:
        loop = asyncio.get_running_loop()
        self.reply, self.stream, self.parts, self.got_bytes = Reply(0, conn=self), stream, [], False
        self.headers_done, self.done = loop.create_future(), loop.create_future()
        self.transport.write(head + body)

    def abort(self) -> None:
        """Drop the connection mid-request (the caller stopped reading, or timed out)."""
        self._fail(UpstreamError("request abandoned"))
        self.closed = True
        self.transport.abort()


class Origin:
    """Connections to one scheme://host:port: at most `limit` at once, idle ones kept for reuse."""

    def __init__(self, url: str, limit: int):
        parts = urlsplit(url)
        self.https = parts.scheme == "https"
        self.host, self.port = parts.hostname, parts.port or (443 if self.https else 80)
        self.host_header = parts.netloc
        self.idle: deque[Connection] = deque()
        self.slots = asyncio.Semaphore(limit)
        self.ssl = ssl.create_default_context() if self.https else None

    def ended(self, conn: Connection, reusable: bool) -> None:
        self.slots.release()
        if reusable:
            self.idle.append(conn)

    async def acquire(self, timeout_s: float) -> tuple[Connection, bool]:
        """(a connection, whether it is a reused one); the caller must send on it."""
        await self.slots.acquire()
        while self.idle:
            conn = self.idle.pop()  # the most recently used: the least likely to have been closed
            if not conn.closed:
                return conn, True
        try:
            return await self._connect(timeout_s), False
        except BaseException:
            self.slots.release()
            raise

    async def _connect(self, timeout_s: float) -> Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout_s):
                _, conn = await loop.create_connection(lambda: Connection(self.ended), self.host, self.port,
                                                       ssl=self.ssl, server_hostname=self.host if self.ssl else None)
        except (OSError, TimeoutError, ssl.SSLError) as e:
            raise UpstreamError(f"cannot connect to {self.host}:{self.port}: {e}") from e
        return conn


class Upstream:
    """`await request(method, url, body, headers)`: a whole Reply; `stream=True`: a Reply whose chunks arrive on
    `reply.chunks` (the caller must drain it or call `close(reply)`)."""

    def __init__(self, limit_per_origin: int, connect_timeout_s: float, timeout_s: float):
        self.limit, self.connect_timeout_s, self.timeout_s = limit_per_origin, connect_timeout_s, timeout_s
        self.origins: dict[str, Origin] = {}

    async def request(self, method: str, url: str, body: bytes = b"", headers: dict[str, str] | None = None,
                      stream: bool = False, timeout_s: float | None = None) -> Reply:
        scheme, _, rest = url.partition("://")
        netloc, _, path = rest.partition("/")
        origin = self.origins.get(scheme + netloc)
        if origin is None:
            origin = self.origins[scheme + netloc] = Origin(url, self.limit)
        head = self._head(method, "/" + path, origin, body, headers or {})
        timeout = timeout_s or self.timeout_s
        for attempt in range(2):
            conn, reused = await origin.acquire(self.connect_timeout_s)
            conn.send(head, body, stream)
            try:
                async with asyncio.timeout(timeout):
                    reply = await (conn.headers_done if stream else conn.done)
            except UpstreamError:
                if reused and not conn.got_bytes and attempt == 0:
                    continue  # the server had closed this idle connection: nothing was processed
                raise
            except BaseException:
                conn.abort()  # a timeout or a cancelled caller: the connection is in an unknown state
                raise
            return reply
        raise AssertionError("unreachable")

    @staticmethod
    def close(reply: Reply | None) -> None:
        """The caller is done with a streamed reply: drop its connection if the body did not end."""
        conn = reply.conn if reply is not None else None
        if conn is not None and conn.reply is reply:
            conn.abort()

    @staticmethod
    def _head(method: str, path: str, origin: Origin, body: bytes, headers: dict[str, str]) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {origin.host_header}", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def close_all(self) -> None:
        for origin in self.origins.values():
            while origin.idle:
                origin.idle.pop().transport.close()
