"""bench/gateway.py's sections that need no model: overhead vs LiteLLM, backend kill, limits + audit."""

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
import numpy as np
from gateway_procs import Proc, backend, free_port, gateway, toml_config

from posttrain.gateway.audit import verify
from posttrain.gateway.keys import key_toml, new_key

HERE = Path(__file__).resolve().parent
LOADS = (1, 50, 200)
RATE = 100  # req/s offered at every load (the published LiteLLM test ran at 100 QPS): the backend waits c / RATE s


def load_cmd(url: str, c: int, n: int, body: dict, key: str | None = None, stream: bool = False) -> list[str]:
    cmd = [sys.executable, str(HERE / "gateway_load.py"), "--url", url, "--concurrency", str(c),
           "--requests", str(n), "--body", json.dumps(body)]
    return cmd + (["--key", key] if key else []) + (["--stream"] if stream else [])


def load(*args, **kw) -> dict:
    r = subprocess.run(load_cmd(*args, **kw), capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def chat(content: str, **extra) -> dict:
    return {"model": "standard", "messages": [{"role": "user", "content": content}], "max_tokens": 8, **extra}


def litellm(port: int, backend_port: int, tmp: Path) -> Proc:
    exe = subprocess.run(["bash", str(HERE / "litellm_setup.sh")], capture_output=True, text=True, check=True)
    yaml = (f"model_list:\n  - model_name: standard\n    litellm_params:\n      model: openai/standard\n"
            f"      api_base: http://127.0.0.1:{backend_port}/v1\n      api_key: none\n")
    (tmp / "litellm.yaml").write_text(yaml)
    args = [str(Path.cwd() / exe.stdout.strip().splitlines()[-1]), "--config", str(tmp / "litellm.yaml"),
            "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"]
    return Proc(args, f"http://127.0.0.1:{port}/health/liveliness", env={"LITELLM_LOG": "ERROR"}, ready_timeout_s=180)


def stats(r: dict) -> dict:
    ok = [lat for lat, s in zip(r["latency_ms"], r["status"]) if s == 200]
    lat = np.array(ok) if ok else np.array([float("nan")])
    return {"p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99)),
            "mean_ms": float(lat.mean()), "requests": len(r["status"]), "errors": len(r["status"]) - len(ok),
            "rps": len(r["status"]) / r["wall_s"]}


def bench_overhead(quick: bool, with_litellm: bool = True) -> dict:
    """Added latency over calling the backend directly, at 1, 50 and 200 concurrent clients."""
    tmp = Path(tempfile.mkdtemp(prefix="gw-bench-"))
    bport, gport, lport = free_port(), free_port(), free_port()
    key, record = new_key("bench")
    (tmp / "gw.toml").write_text(toml_config(gport, tmp / "audit.sqlite", {"standard": [bport]}, extra=key_toml(record)))
    procs = [backend(bport).start(), gateway(tmp / "gw.toml", gport).start()]
    targets = {"direct": (f"http://127.0.0.1:{bport}", None), "gateway": (f"http://127.0.0.1:{gport}", key)}
    if with_litellm:
        procs.append(litellm(lport, bport, tmp).start())
        targets["litellm"] = (f"http://127.0.0.1:{lport}", None)
    rows, out = {}, {}
    try:
        for c in LOADS:
            body = chat(f"delay_ms={1000 * c / RATE:.1f} hello, gateway")
            n = max(int(RATE * (4 if quick else 10)), 5 * c)
            for name, (base, k) in targets.items():
                load(f"{base}/v1/chat/completions", c, min(2 * c, 400), body, k)  # warm connections
                rows[(name, c)] = stats(load(f"{base}/v1/chat/completions", c, n, body, k))
                print(f"[overhead] c={c} {name}: {rows[(name, c)]}", flush=True)
            for name, prefix in (("gateway", ""), ("litellm", "litellm_")):
                if (name, c) in rows:
                    for q in ("p50", "p99"):
                        out[f"{prefix}overhead_{q}_ms_c{c}"] = rows[(name, c)][f"{q}_ms"] - rows[("direct", c)][f"{q}_ms"]
    finally:
        for p in reversed(procs):
            p.stop()
    out["overhead_rows"] = [{"target": t, "concurrency": c, **v} for (t, c), v in rows.items()]
    out["overhead_setup"] = {"offered_rps": RATE, "backend_delay_ms": {c: 1000 * c / RATE for c in LOADS},
                             "gateway": "one key, audit log and metrics on", "litellm": "no master key, no DB"}
    return out


def bench_kill(quick: bool) -> dict:
    """SIGKILL one of two backends under load, restart it; count failed requests, check re-admission."""
    tmp = Path(tempfile.mkdtemp(prefix="gw-kill-"))
    a, b, g = free_port(), free_port(), free_port()
    (tmp / "gw.toml").write_text(toml_config(g, tmp / "audit.sqlite", {"standard": [a, b]}, cooldown_s=1.0))
    victim = backend(b)
    procs = [backend(a).start(), victim.start(), gateway(tmp / "gw.toml", g).start()]
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
    procs = [backend(bport, "--tokens", "64").start()]
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
    print(f"\n{'target':<9} {'c':>4} {'p50 ms':>8} {'p99 ms':>8} {'rps':>7} {'err':>4}")
    for row in out.get("overhead_rows", []):
        print(f"{row['target']:<9} {row['concurrency']:>4} {row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} "
              f"{row['rps']:>7.0f} {row['errors']:>4}")
    keys = [k for k in out if k.startswith(("overhead_p", "litellm_overhead", "failed_", "limit_overshoot",
                                              "audit_", "fast_vs", "int8_", "greedy_"))]
    for k in keys:
        print(f"{k:<40} {out[k]}")
