"""HTTP load generator for bench/gateway.py, run as its own process (pinned to its own core by the
caller) so that it never shares an event loop or a GIL with the server under test.

    python bench/parts/gateway_load.py --url URL --requests N --body JSON (--concurrency C | --rate R)
                                 [--key K] [--stream] [--warmup N --warmup-body JSON] [--out PATH]

Closed loop (--concurrency C): each of C clients sends its next request when its last one ends.
Open loop (--rate R): requests start at Poisson arrival times (seeded, so every target gets the
same schedule) whatever the target does, so a slow target cannot slow the offered load, and
clients never synchronise into bursts. A closed-loop warm-up at --warmup-concurrency opens
keep-alive connections first; it is not recorded. Prints (or writes) one JSON object:
{"latency_ms", "status", "start_s", "tokens", "lag_ms", "wall_s", "max_in_flight"}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time

import aiohttp


class Recorder:
    def __init__(self, url: str, body: bytes, headers: dict, stream: bool):
        self.url, self.body, self.headers, self.stream = url, body, headers, stream
        self.out = {"latency_ms": [], "status": [], "start_s": [], "tokens": [], "lag_ms": []}
        self.in_flight = self.max_in_flight = 0
        self.t0 = time.perf_counter()

    async def one(self, session: aiohttp.ClientSession, scheduled: float | None = None, body: bytes | None = None,
                  record: bool = True) -> None:
        start = time.perf_counter()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        status, tokens = await self._send(session, body or self.body)
        self.in_flight -= 1
        if record:
            o = self.out
            o["latency_ms"].append((time.perf_counter() - start) * 1000)
            o["status"].append(status)
            o["start_s"].append(start - self.t0)
            o["tokens"].append(tokens)
            o["lag_ms"].append(0.0 if scheduled is None else (start - scheduled) * 1000)

    async def _send(self, session: aiohttp.ClientSession, body: bytes) -> tuple[int, int]:
        tokens = 0
        try:
            async with session.post(self.url, data=body, headers=self.headers) as r:
                if self.stream:
                    async for line in r.content:
                        tokens += line.startswith(b"data: {") and b'"choices"' in line
                else:
                    payload = await r.read()
                    if r.status == 200:
                        tokens = (json.loads(payload).get("usage") or {}).get("completion_tokens", 0)
                return r.status, tokens
        except (aiohttp.ClientError, asyncio.TimeoutError):
            return -1, tokens


async def closed_loop(rec: Recorder, session, concurrency: int, n: int, body: bytes | None = None,
                      record: bool = True) -> None:
    left = [n]

    async def client():
        while left[0] > 0:
            left[0] -= 1
            await rec.one(session, body=body, record=record)

    await asyncio.gather(*(client() for _ in range(concurrency)))


async def open_loop(rec: Recorder, session, rate: float, n: int, seed: int) -> None:
    rng, tasks = random.Random(seed), []
    start = time.perf_counter()
    due = start
    for _ in range(n):
        due += rng.expovariate(rate)
        wait = due - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        tasks.append(asyncio.create_task(rec.one(session, scheduled=due)))
    await asyncio.gather(*tasks)


async def run(a: argparse.Namespace) -> dict:
    headers = {"content-type": "application/json", **({"Authorization": f"Bearer {a.key}"} if a.key else {})}
    rec = Recorder(a.url, a.body.encode(), headers, a.stream)
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=60)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        if a.warmup:
            await closed_loop(rec, session, a.warmup_concurrency or a.concurrency or 1, a.warmup,
                              (a.warmup_body or a.body).encode(), record=False)
        rec.t0 = t0 = time.perf_counter()
        rec.max_in_flight = 0
        if a.rate:
            await open_loop(rec, session, a.rate, a.requests, a.seed)
        else:
            await closed_loop(rec, session, a.concurrency, a.requests)
        rec.out["wall_s"] = time.perf_counter() - t0
    rec.out["max_in_flight"] = rec.max_in_flight
    return rec.out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--requests", type=int, required=True)
    p.add_argument("--body", required=True)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--concurrency", type=int, help="Closed loop: this many clients.")
    mode.add_argument("--rate", type=float, help="Open loop: Poisson arrivals at this many requests/s.")
    p.add_argument("--seed", type=int, default=0, help="Seed of the open loop's arrival times.")
    p.add_argument("--warmup", type=int, default=0, help="Unrecorded closed-loop requests first.")
    p.add_argument("--warmup-concurrency", type=int, default=0)
    p.add_argument("--warmup-body", default=None)
    p.add_argument("--key", default=None)
    p.add_argument("--stream", action="store_true")
    p.add_argument("--out", default=None, help="Write the JSON here instead of stdout.")
    a = p.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    result = asyncio.run(run(a))
    # uvloop leaves stdout non-blocking: a reader that waits would see the JSON cut at 64 KiB
    os.set_blocking(sys.stdout.fileno(), True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f)
    else:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
