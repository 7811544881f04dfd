"""The gateway's upstream client against real TCP servers on loopback that misbehave on purpose."""

import asyncio
import shutil
import ssl
import subprocess

import pytest

from posttrain.gateway.upstream import Upstream, UpstreamError

OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{"ok": true}'


async def read_request(reader: asyncio.StreamReader) -> bytes | None:
    """One request's head and Content-Length body, or None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0)
    return head + await reader.readexactly(length)


class Server:
    """A loopback server whose handler(n_on_conn, request, writer) scripts each reply."""

    def __init__(self, handler):
        self.handler, self.connections, self.requests = handler, 0, []

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc):
        self.server.close()

    async def _serve(self, reader, writer):
        self.connections += 1
        n = 0
        try:
            while (request := await read_request(reader)) is not None:
                self.requests.append(request)
                n += 1
                if not await self.handler(n, request, writer):
                    break
        except (asyncio.CancelledError, ConnectionError):
            pass  # the test ended, or the client dropped the connection
        writer.close()


async def reply_ok(n, request, writer):
    writer.write(OK)
    await writer.drain()
    return True


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_keep_alive_reuses_one_connection_and_sends_the_body():
    async def main():
        async with Server(reply_ok) as s:
            client = Upstream(8, 2.0, 5.0)
            for i in range(3):
                r = await client.request("POST", f"{s.url}/v1/chat/completions", b'{"i": %d}' % i,
                                         {"content-type": "application/json"})
                assert (r.status, r.body) == (200, b'{"ok": true}')
            await client.close_all()
            return s
    s = run(main())
    assert s.connections == 1
    assert s.requests[2].startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert s.requests[2].endswith(b'\r\n\r\n{"i": 2}')


def test_chunked_reply_is_reassembled_and_streamed_in_pieces():
    async def chunked(n, request, writer):
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"6\r\n world\r\n0\r\n\r\n")
        await writer.drain()
        return True

    async def main():
        async with Server(chunked) as s:
            client = Upstream(8, 2.0, 5.0)
            whole = await client.request("POST", f"{s.url}/x", b"{}")
            streamed = await client.request("POST", f"{s.url}/x", b"{}", stream=True)
            pieces = []
            while (piece := await streamed.chunks.get()) is not None:
                pieces.append(piece)
            return whole.body, pieces
    whole, pieces = run(main())
    assert whole == b"hello world"
    assert pieces == [b"hello", b" world"]


def test_an_idle_connection_the_server_dropped_is_replaced_once():
    """The server answers the first request, then drops its connection on the next one without a
    reply (an idle timeout racing the request): the client resends once on a fresh connection."""
    async def drop_second(n, request, writer):
        if n == 2:
            return False
        return await reply_ok(n, request, writer)

    async def main():
        async with Server(drop_second) as s:
            client = Upstream(8, 2.0, 5.0)
            await client.request("POST", f"{s.url}/x", b"{}")
            r = await client.request("POST", f"{s.url}/x", b"{}")
            return s, r
    s, r = run(main())
    assert r.status == 200 and s.connections == 2


@pytest.mark.parametrize("script", ["close_at_once", "truncated_body", "garbage"])
def test_a_broken_reply_on_a_fresh_connection_raises(script):
    async def broken(n, request, writer):
        if script == "truncated_body":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"partial")
        elif script == "garbage":
            writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        await writer.drain()
        return False

    async def main():
        async with Server(broken) as s:
            client = Upstream(8, 2.0, 5.0)
            with pytest.raises(UpstreamError):
                await client.request("POST", f"{s.url}/x", b"{}")
            await asyncio.sleep(0.1)  # the connection's loss arrives after the failure
            return s, client.origins["http" + s.url.split("//")[1]].slots._value
    s, free_slots = run(main())
    assert s.connections == 1  # not retried: a fresh connection's failure is the server's
    assert free_slots == 8  # released once, not once per failure signal


def test_connection_refused_raises():
    async def main():
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(UpstreamError, match="cannot connect"):
            await Upstream(8, 2.0, 5.0).request("GET", f"http://127.0.0.1:{port}/models")
    run(main())


def test_a_timeout_frees_the_slot_and_drops_the_connection():
    seen = []

    async def silent_first(n, request, writer):
        seen.append(request)
        if len(seen) == 1:
            await asyncio.sleep(10)
            return False
        return await reply_ok(n, request, writer)

    async def main():
        async with Server(silent_first) as s:
            client = Upstream(1, 2.0, 5.0)  # one slot: the second request needs the first's back
            with pytest.raises(TimeoutError):
                await client.request("POST", f"{s.url}/x", b"{}", timeout_s=0.2)
            r = await client.request("POST", f"{s.url}/x", b"{}")
            return s, r
    s, r = run(main())
    assert r.status == 200 and s.connections == 2


def test_closing_a_stream_early_aborts_its_connection():
    async def endless(n, request, writer):
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        try:
            while True:
                writer.write(b"4\r\ntick\r\n")
                await writer.drain()
                await asyncio.sleep(0.01)
        except ConnectionError:
            return False

    async def main():
        async with Server(endless) as s:
            client = Upstream(1, 2.0, 5.0)
            r = await client.request("POST", f"{s.url}/x", b"{}", stream=True)
            assert await r.chunks.get() == b"tick"
            client.close(r)
            slot_back = await asyncio.wait_for(client.origins["http" + s.url.split("//")[1]].slots.acquire(), 1)
            return slot_back
    assert run(main()) is True


def self_signed(tmp_path) -> tuple[str, str]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl (the CLI) makes the test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return str(cert), str(key)


def test_https_backends_are_verified(tmp_path, monkeypatch):
    """TLS with the system's verification: a certificate trusted through SSL_CERT_FILE passes,
    the same server is refused when nothing vouches for its certificate."""
    cert, key = self_signed(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)

    async def main(trusted: bool):
        server = await asyncio.start_server(Server(reply_ok)._serve, "127.0.0.1", 0, ssl=server_ctx)
        url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/models"
        try:
            if trusted:
                return (await Upstream(8, 2.0, 5.0).request("GET", url)).status
            with pytest.raises(UpstreamError, match="CERTIFICATE_VERIFY_FAILED"):
                await Upstream(8, 2.0, 5.0).request("GET", url)
        finally:
            server.close()

    monkeypatch.setenv("SSL_CERT_FILE", cert)
    assert run(main(True)) == 200
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "none.pem"))
    run(main(False))
