"""Replay logged calls as a regression test: re-send each logged request (with its seed) to a
candidate variant and report output flips and latency differences.

A flip is a reply whose text differs from the logged one. Only replies that can repeat count:
greedy (temperature 0) or seeded requests; sampled requests without a seed are replayed for
latency but left out of the flip rate.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field

import httpx
import numpy as np

from posttrain.gateway.tokens import usage_of


@dataclass
class ReplayReport:
    against: str
    replayed: int = 0
    comparable: int = 0
    flips: int = 0
    errors: int = 0
    latency_delta_ms: list[float] = field(default_factory=list)
    flipped_ids: list[int] = field(default_factory=list)
    first_error: str | None = None

    def summary(self) -> dict:
        d = np.array(self.latency_delta_ms) if self.latency_delta_ms else np.array([np.nan])
        return {"against": self.against, "replayed": self.replayed, "comparable": self.comparable,
                "flips": self.flips, "flip_rate": self.flips / self.comparable if self.comparable else None,
                "errors": self.errors, "latency_delta_ms_p50": float(np.percentile(d, 50)),
                "latency_delta_ms_p90": float(np.percentile(d, 90)), "flipped_ids": self.flipped_ids[:50],
                "first_error": self.first_error}


def logged_calls(db: str, limit: int | None) -> list[tuple]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    sql = ("SELECT id, route, request, output, latency_ms FROM calls WHERE kind = 'call' AND status = 200 "
           "AND request IS NOT NULL ORDER BY id" + (f" LIMIT {int(limit)}" if limit else ""))
    rows = con.execute(sql).fetchall()
    con.close()
    return rows


def repeatable(body: dict) -> bool:
    return body.get("temperature", 1.0) == 0 or body.get("seed") is not None


def replay(db: str, base_url: str, against: str, limit: int | None = None, api_key: str | None = None) -> ReplayReport:
    """Send each logged request, non-streamed, as `model: against` to the gateway at base_url."""
    report = ReplayReport(against)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(timeout=600, headers=headers) as client:
        for rid, route, request, output, latency_ms in logged_calls(db, limit):
            body = {**json.loads(request), "model": against, "stream": False}
            t0 = time.perf_counter()
            r = client.post(f"{base_url.rstrip('/')}{route.split()[0]}", json=body)
            report.replayed += 1
            if r.status_code != 200:
                report.errors += 1
                report.first_error = report.first_error or f"HTTP {r.status_code} {r.text[:200]}"
                continue
            report.latency_delta_ms.append((time.perf_counter() - t0) * 1000 - latency_ms)
            if repeatable(body) and output is not None:
                report.comparable += 1
                if usage_of(r.content)[2] != output:
                    report.flips += 1
                    report.flipped_ids.append(rid)
    return report
