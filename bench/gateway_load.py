"""Closed-loop HTTP load generator for bench/gateway.py, run as its own process so that it never
shares an event loop (or a core's GIL) with the server under test.

    python bench/gateway_load.py --url URL --concurrency C --requests N --body JSON [--key K] [--stream]

Each of C clients sends its next request as soon as its last one ends; prints one JSON object:
{"latency_ms": [...], "status": [...], "start_s": [...], "tokens": [...], "wall_s": ...}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

import aiohttp


async def one(session: aiohttp.ClientSession, url: str, body: bytes, headers: dict, stream: bool, t0: float, out: dict):
    start = time.perf_counter()
    tokens = 0
    try:
        async with session.post(url, data=body, headers=headers) as r:
            status = r.status
            if stream:
                async for line in r.content:
                    tokens += line.startswith(b"data: {") and b'"choices"' in line
            else:
                payload = await r.read()
                if status == 200:
                    tokens = (json.loads(payload).get("usage") or {}).get("completion_tokens", 0)
    except (aiohttp.ClientError, asyncio.TimeoutError):
        status = -1
    out["latency_ms"].append((time.perf_counter() - start) * 1000)
    out["status"].append(status)
    out["start_s"].append(start - t0)
    out["tokens"].append(tokens)


async def run(url: str, concurrency: int, n: int, body: bytes, key: str | None, stream: bool) -> dict:
    headers = {"content-type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    out = {"latency_ms": [], "status": [], "start_s": [], "tokens": []}
    left = [n]
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        t0 = time.perf_counter()

        async def worker():
            while left[0] > 0:
                left[0] -= 1
                await one(session, url, body, headers, stream, t0, out)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        out["wall_s"] = time.perf_counter() - t0
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--concurrency", type=int, required=True)
    p.add_argument("--requests", type=int, required=True)
    p.add_argument("--body", required=True)
    p.add_argument("--key", default=None)
    p.add_argument("--stream", action="store_true")
    p.add_argument("--out", default=None, help="Write the JSON here instead of stdout.")
    a = p.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    result = asyncio.run(run(a.url, a.concurrency, a.requests, a.body.encode(), a.key, a.stream))
    # uvloop leaves stdout non-blocking: a reader that waits would see the JSON cut at 64 KiB
    os.set_blocking(sys.stdout.fileno(), True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f)
    else:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
