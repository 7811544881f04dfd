"""bench/gateway.py's sections that need no model: a backend killed under load, limits + audit, the table."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from parts.gateway_procs import backend, free_port, gateway, toml_config

from posttrain.gateway.audit import verify
from posttrain.gateway.keys import key_toml, new_key

HERE = Path(__file__).resolve().parent


def load_cmd(url: str, c: int, n: int, body: dict, key: str | None = None, stream: bool = False) -> list[str]:
    cmd = [sys.executable, str(HERE / "gateway_load.py"), "--url", url, "--concurrency", str(c),
           "--requests", str(n), "--body", json.dumps(body)]
    return cmd + (["--key", key] if key else []) + (["--stream"] if stream else [])


def load(*args, **kw) -> dict:
    r = subprocess.run(load_cmd(*args, **kw), capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def chat(content: str, **extra) -> dict:
    return {"model": "standard", "messages": [{"role": "user", "content": content}], "max_tokens": 8, **extra}


def bench_kill(quick: bool) -> dict:
    """SIGKILL one of two backends under load, restart it; count failed requests, check re-admission."""
    tmp = Path(tempfile.mkdtemp(prefix="gw-kill-"))
    a, b, g = free_port(), free_port(), free_port()
    (tmp / "gw.toml").write_text(toml_config(g, tmp / "audit.sqlite", {"standard": [a, b]}, cooldown_s=1.0))
    victim = backend(b, serves=["standard"])
    procs = [backend(a, serves=["standard"]).start(), victim.start(), gateway(tmp / "gw.toml", g).start()]
    n = 1500 if quick else 3000
    try:
        result = tmp / "load.json"  # a file, not a pipe nobody reads while the load runs
        gen = subprocess.Popen(load_cmd(f"http://127.0.0.1:{g}/v1/chat/completions", 50, n, chat("delay_ms=50 hi"))
                               + ["--out", str(result)])
        time.sleep(1.0)
        victim.stop(signal.SIGKILL)
        time.sleep(2.0)
        victim.start()
        gen.wait()
        r = json.loads(result.read_text())
        url, deadline = f"http://127.0.0.1:{b}/v1", time.monotonic() + 10
        while not (h := httpx.get(f"http://127.0.0.1:{g}/health").json()["backends"][url])["healthy"]:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        for p in reversed(procs):
            p.stop()
    failed = sum(s != 200 for s in r["status"])
    print(f"[kill] {len(r['status'])} requests, {failed} failed, killed backend: {h}", flush=True)
    return {"failed_requests_backend_kill": failed, "backend_kill_requests": len(r["status"]),
            "backend_kill_victim": h, "backend_kill_readmitted": bool(h["healthy"] and h["readmissions"] >= 1)}


def bench_limits(quick: bool) -> dict:
    """200 concurrent streams on one key with a tokens/minute limit: grants never exceed it."""
    tmp = Path(tempfile.mkdtemp(prefix="gw-limit-"))
    bport, g, limit = free_port(), free_port(), 20_000
    key, record = new_key("one", tpm=limit)
    db = tmp / "audit.sqlite"
    (tmp / "gw.toml").write_text(toml_config(g, db, {"standard": [bport]}, extra=key_toml(record)))
    procs = [backend(bport, "--tokens", "64", serves=["standard"]).start()]
    gw = gateway(tmp / "gw.toml", g).start()
    n = 1000 if quick else 2000
    try:
        r = load(f"http://127.0.0.1:{g}/v1/chat/completions", 200, n,
                 chat("delay_ms=100 stream me some tokens", max_tokens=64, stream=True), key, stream=True)
    finally:
        gw.stop()  # clean shutdown: every queued audit row is written
        for p in procs:
            p.stop()
    con = sqlite3.connect(db)
    rows, span = con.execute("SELECT COUNT(*), MAX(ts) - MIN(ts) FROM calls").fetchone()
    grants = con.execute("SELECT ts - latency_ms / 1000, tokens_in + tokens_out FROM calls WHERE status = 200").fetchall()
    granted = max_in_window(grants, 60.0)
    ok_before = verify(str(db))
    con.execute("UPDATE calls SET tokens_out = tokens_out + 1 WHERE id = ?", (rows // 2,))
    con.commit()
    after = verify(str(db))
    out = {"limit_tpm": limit, "limit_requests": n, "limit_admitted": sum(s == 200 for s in r["status"]),
           "limit_429": sum(s == 429 for s in r["status"]), "limit_tokens_granted_max_60s": granted,
           "limit_overshoot_tokens": max(0, granted - limit), "limit_run_span_s": span,
           "audit_rows": rows, "audit_rows_match_requests": rows == n, "audit_chain_verifies": ok_before.ok,
           "audit_modified_row_detected": (not after.ok) and after.first_bad_id == rows // 2}
    print(f"[limits] {out}", flush=True)
    return out


def max_in_window(grants: list[tuple[float, int]], window_s: float) -> int:
    """The most tokens granted within any `window_s` span of admission times."""
    grants.sort()
    best = total = lo = 0
    for hi in range(len(grants)):
        total += grants[hi][1]
        while grants[hi][0] - grants[lo][0] >= window_s:
            total -= grants[lo][1]
            lo += 1
        best = max(best, total)
    return best


def print_table(out: dict) -> None:
    print(f"\n{'target':<9} {'c':>4} {'p50 ms':>9} {'p99 ms':>9} {'rps':>5} {'err':>4} {'in flight':>9} {'cpu us/req':>10}")
    for row in out.get("overhead_rows", []):
        cpu = row.get("proxy_cpu_us_per_request")
        print(f"{row['target']:<9} {row['concurrency']:>4} {row['p50_ms']:>9.2f} {row['p99_ms']:>9.2f} "
              f"{row['rps']:>5.0f} {row['errors']:>4} {row.get('max_in_flight', 0):>9} {'' if cpu is None else f'{cpu:.0f}':>10}")
    keys = [k for k in out if k.startswith(("overhead_p", "litellm_overhead", "failed_", "limit_overshoot",
                                              "audit_", "fast_vs", "int8_", "greedy_"))]
    for k in keys:
        print(f"{k:<40} {out[k]}")
