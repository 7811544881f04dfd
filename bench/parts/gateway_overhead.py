"""bench/gateway.py's overhead section: the latency the gateway (and LiteLLM's proxy) adds over
calling the same backend directly, at 1, 50 and 200 requests in flight.

Method. The load is open loop: Poisson arrivals at RATE req/s, the same seeded schedule for every
target, and the backend holds each request c / RATE s, so c requests are in flight on average
(Little's law). A closed loop would synchronise the clients: all c would arrive in one burst
every c / RATE s, and the proxy would queue them behind each other. On a machine with two or
more cores the proxy under test gets a core of its own and the load generator and the backend
share another, the layout of a real deployment (gateway and model servers on different hosts);
the direct path runs under the same pinning, its core for the proxy idle. Targets take turns in
short rounds (the order rotated each round) so that other work on the machine hits all of them
alike; percentiles are pooled over rounds. Added latency = proxy percentile − direct percentile.
The proxy's CPU time per request (from /proc) is reported beside it, independent of queueing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from parts.gateway_procs import Proc, backend, cpu_seconds, free_port, gateway, pinned, toml_config

from posttrain.gateway.keys import key_toml, new_key

HERE = Path(__file__).resolve().parent
LOADS = (1, 50, 200)
RATE = 100  # req/s offered at every load (the published LiteLLM test ran at 100 QPS)


def cores() -> tuple[set[int] | None, set[int] | None]:
    """(the proxy's core, the load generator's and backend's core), or (None, None) on one core."""
    cpus = sorted(os.sched_getaffinity(0))
    return ({cpus[-1]}, set(cpus[:-1])) if len(cpus) >= 2 else (None, None)


def chat(content: str) -> dict:
    return {"model": "standard", "messages": [{"role": "user", "content": content}], "max_tokens": 8}


def litellm_flags(port: int | str, backend_port: int | str) -> dict:
    """LiteLLM proxy's flags, environment and config beyond its defaults (the JSON's peer_flags)."""
    yaml = (f"model_list:\n  - model_name: standard\n    litellm_params:\n      model: openai/standard\n"
            f"      api_base: http://127.0.0.1:{backend_port}/v1\n      api_key: none\n")
    return {"args": ["--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"],
            "env": {"LITELLM_LOG": "ERROR"}, "config": yaml}


def litellm(port: int, backend_port: int, tmp: Path, cpus: set[int] | None) -> Proc:
    exe = subprocess.run(["bash", str(HERE / "litellm_setup.sh")], capture_output=True, text=True, check=True)
    flags = litellm_flags(port, backend_port)
    (tmp / "litellm.yaml").write_text(flags["config"])
    args = [str(Path.cwd() / exe.stdout.strip().splitlines()[-1]), "--config", str(tmp / "litellm.yaml"), *flags["args"]]
    return Proc(args, f"http://127.0.0.1:{port}/health/liveliness", env=flags["env"],
                ready_timeout_s=180, cpus=cpus)


def warmup(c: int) -> int:
    return max(2 * c, 50)


def open_loop(url: str, c: int, n: int, seed: int, key: str | None, cpus: set[int] | None, tmp: Path) -> dict:
    """n requests at RATE req/s held c / RATE s each, after an unrecorded closed-loop warm-up at c clients
    (it opens c keep-alive connections through the proxy to the backend)."""
    out = tmp / "load.json"
    cmd = [sys.executable, str(HERE / "gateway_load.py"), "--url", url, "--rate", str(RATE), "--seed", str(seed),
           "--requests", str(n), "--body", json.dumps(chat(f"delay_ms={1000 * c / RATE:.1f} hello, gateway")),
           "--warmup", str(warmup(c)), "--warmup-concurrency", str(c), "--warmup-body", json.dumps(chat("delay_ms=20 warm")),
           "--out", str(out)] + (["--key", key] if key else [])
    subprocess.run(cmd, check=True, preexec_fn=pinned(cpus))
    return json.loads(out.read_text())


def pooled(runs: list[dict]) -> dict:
    lat = [x for r in runs for x, s in zip(r["latency_ms"], r["status"]) if s == 200]
    lag = [x for r in runs for x in r["lag_ms"]]
    a = np.array(lat) if lat else np.array([float("nan")])
    total = sum(len(r["status"]) for r in runs)
    # rps: requests over the span of their start times, the arrival rate the target was really offered
    return {"p50_ms": float(np.percentile(a, 50)), "p99_ms": float(np.percentile(a, 99)), "mean_ms": float(a.mean()),
            "requests": total, "errors": total - len(lat), "rps": total / sum(max(r["start_s"]) for r in runs),
            "max_in_flight": max(r["max_in_flight"] for r in runs), "send_lag_p99_ms": float(np.percentile(lag, 99)),
            "round_p50_ms": [float(np.percentile([x for x, s in zip(r["latency_ms"], r["status"]) if s == 200] or [0], 50))
                             for r in runs]}


def start_stack(tmp: Path, with_litellm: bool) -> tuple[list[Proc], dict]:
    """The backend, the gateway (one key, audit log and metrics on) and LiteLLM; {target: (url, key, proc)}."""
    proxy_cpus, client_cpus = cores()
    bport, gport, lport = free_port(), free_port(), free_port()
    key, record = new_key("bench")
    (tmp / "gw.toml").write_text(toml_config(gport, tmp / "audit.sqlite", {"standard": [bport]}, extra=key_toml(record)))
    b, g = backend(bport, serves=["standard"], cpus=client_cpus).start(), gateway(tmp / "gw.toml", gport, cpus=proxy_cpus).start()
    procs = [b, g]
    targets = {"direct": (f"http://127.0.0.1:{bport}", None, None), "gateway": (f"http://127.0.0.1:{gport}", key, g)}
    if with_litellm:
        procs.append(lite := litellm(lport, bport, tmp, proxy_cpus).start())
        targets["litellm"] = (f"http://127.0.0.1:{lport}", None, lite)
    return procs, targets


def measure_load(targets: dict, c: int, rounds: int, n: int, tmp: Path) -> dict:
    """{target: pooled stats} at one load, the targets taking turns round by round."""
    _, client_cpus = cores()
    runs: dict[str, list] = {t: [] for t in targets}
    cpu: dict[str, float] = {t: 0.0 for t in targets}
    loads = []
    names = list(targets)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            base, key, proc = targets[name]
            loads.append(os.getloadavg()[0])
            before = cpu_seconds(proc.proc.pid) if proc else 0.0
            runs[name].append(open_loop(f"{base}/v1/chat/completions", c, n, seed=r, key=key, cpus=client_cpus, tmp=tmp))
            cpu[name] += (cpu_seconds(proc.proc.pid) - before) if proc else 0.0
    rows = {}
    for name in names:
        rows[name] = pooled(runs[name])
        # the warm-up's 2c requests ran through the proxy too
        rows[name]["proxy_cpu_us_per_request"] = 1e6 * cpu[name] / (rounds * (n + warmup(c))) if targets[name][2] else None
        rows[name]["loadavg_1m_during"] = [min(loads), max(loads)]
        print(f"[overhead] c={c} {name}: { {k: v for k, v in rows[name].items() if k != 'round_p50_ms'} }", flush=True)
    return rows


def bench_overhead(quick: bool, with_litellm: bool = True) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="gw-bench-"))
    rounds, n = (2, 3 * RATE) if quick else (4, 6 * RATE)
    procs, targets = start_stack(tmp, with_litellm)
    out, rows = {}, []
    try:
        for c in LOADS:
            by_target = measure_load(targets, c, rounds, n, tmp)
            for name, prefix in (("gateway", ""), ("litellm", "litellm_")):
                if name in by_target:
                    for q in ("p50", "p99"):
                        out[f"{prefix}overhead_{q}_ms_c{c}"] = by_target[name][f"{q}_ms"] - by_target["direct"][f"{q}_ms"]
            rows += [{"target": t, "concurrency": c, **v} for t, v in by_target.items()]
    finally:
        for p in reversed(procs):
            p.stop()
    proxy_cpus, client_cpus = cores()
    out["overhead_rows"] = rows
    out["overhead_setup"] = {"arrivals": f"open loop, Poisson, {RATE} req/s, same seeded schedule per target",
                             "rounds": rounds, "requests_per_round": n, "backend_delay_ms": {c: 1000 * c / RATE for c in LOADS},
                             "proxy_cpus": sorted(proxy_cpus or []), "client_and_backend_cpus": sorted(client_cpus or []),
                             "gateway": "one key, audit log and metrics on", "litellm": "no master key, no DB"}
    if with_litellm:
        out["peer_flags"] = {"litellm": litellm_flags("PORT", "BACKEND_PORT") | {"version": "litellm[proxy]==1.80.0"}}
    return out
