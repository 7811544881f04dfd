"""Sandbox cost, side by side with plain subprocess.run of the same command, in one run.

    python bench/sandbox.py [--quick] [--json PATH]

Measures, for the default bwrap sandbox (namespaces, seccomp, cgroup, tmpfs quota):
  cold start   open_sandbox() + exec("true") + close(), p50/p95/p99 (and with warm=False)
  warm exec    exec("true") in a sandbox whose runner is up, vs subprocess.run(bash -c true),
               sample by sample in turn so that both see the same load
  throughput   execs per second at concurrency 1, 8, 64 (one sandbox per worker thread),
               vs subprocess.run at the same concurrency; failures counted
  idle memory  PSS of an idle sandbox's processes (runner, bwrap), per sandbox
  pool         acquire + exec("true") from a warm pool, and release (reset + health check)
  docker       the same cold start and warm exec for the docker backend, and image build
               time uncached and cached (bench/parts/docker_rows.py; skipped without an engine),
               with docker-over-bwrap ratios
--quick runs fewer samples (well under 2 minutes).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import threading
import time
from pathlib import Path

from parts.docker_rows import docker_rows
from parts.report import add_args, cpu, write_json

from posttrain.sandbox import SandboxSpec, open_sandbox
from posttrain.sandbox.pool import SandboxPool

CMD = "true"


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return 1000 * xs[min(len(xs) - 1, int(q * len(xs)))]


def time_calls(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def subprocess_once() -> None:
    subprocess.run(["/bin/bash", "-c", CMD], check=True)


def cold_once(spec: SandboxSpec) -> None:
    sb = open_sandbox("bwrap", spec)
    r = sb.exec(CMD)
    sb.close()
    assert r.exit_code == 0, r


def throughput(concurrency: int, seconds: float, sandboxed: bool) -> tuple[float, int]:
    """(execs per second, failures) with `concurrency` threads each on its own sandbox."""
    boxes = [open_sandbox("bwrap", SandboxSpec()) for _ in range(concurrency)] if sandboxed else []
    for sb in boxes:
        sb.exec(CMD)                                   # runner up
    counts, failures, stop = [0] * concurrency, [0], time.perf_counter() + seconds

    def work(i: int) -> None:
        while time.perf_counter() < stop:
            try:
                ok = boxes[i].exec(CMD).exit_code == 0 if sandboxed else \
                    subprocess.run(["/bin/bash", "-c", CMD]).returncode == 0
            except Exception:
                ok = False
            counts[i] += ok
            failures[0] += not ok

    start = time.perf_counter()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    for sb in boxes:
        sb.close()
    return sum(counts) / wall, failures[0]


def pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cgroup_usage_kb(sb) -> int:
    """What the kernel charges the sandbox's memory cgroup (user + kernel memory)."""
    if not sb.cgroup:
        return 0
    name = "memory.current" if sb.cgroup.version == "v2" else "memory.usage_in_bytes"
    path = sb.cgroup.dirs["" if sb.cgroup.version == "v2" else "memory"] / name
    return int(path.read_text()) // 1024


def idle_memory_mb(n: int) -> tuple[float, float]:
    """Per idle sandbox: mean PSS of its processes (bwrap, its init, the runner bash),
    and mean memory charged to its cgroup (adds kernel memory: page tables, namespaces)."""
    boxes = [open_sandbox("bwrap", SandboxSpec()) for _ in range(n)]
    for sb in boxes:
        sb.exec(CMD)
    time.sleep(0.2)
    pss = sum(sum(pss_kb(p) for p in {sb._runner.ns.proc.pid, *(sb.cgroup.pids() if sb.cgroup
                                                                else [])}) for sb in boxes)
    charged = sum(cgroup_usage_kb(sb) for sb in boxes)
    for sb in boxes:
        sb.close()
    return pss / n / 1024, charged / n / 1024


def pool_cycle(n: int) -> tuple[list[float], list[float]]:
    """(acquire + exec, release) times from a warm pool; release resets the sandbox."""
    acquire, release = [], []
    with SandboxPool(warm=2) as pool:
        for _ in range(n):
            t = time.perf_counter()
            sb = pool.acquire("bench")
            sb.exec(CMD)
            t1 = time.perf_counter()
            pool.release(sb)
            acquire.append(t1 - t)
            release.append(time.perf_counter() - t1)
    return acquire, release


def run(quick: bool) -> dict:
    n_cold, n_warm, secs = (30, 100, 2.0) if quick else (200, 500, 5.0)
    cold = time_calls(lambda: cold_once(SandboxSpec()), n_cold)
    cold_oneshot = time_calls(lambda: cold_once(SandboxSpec(warm=False)), n_cold)
    with open_sandbox("bwrap", SandboxSpec()) as sb:
        sb.exec(CMD)
        warm, sub = [], []
        for _ in range(n_warm):          # alternate, so both see the same machine load
            warm += time_calls(lambda: sb.exec(CMD), 1)
            sub += time_calls(subprocess_once, 1)
    out = {
        "cold_start_p50_ms": pct(cold, 0.5), "cold_start_p95_ms": pct(cold, 0.95),
        "cold_start_p99_ms": pct(cold, 0.99),
        "cold_start_oneshot_p50_ms": pct(cold_oneshot, 0.5),
        "warm_exec_p50_ms": pct(warm, 0.5), "warm_exec_p95_ms": pct(warm, 0.95),
        "subprocess_p50_ms": pct(sub, 0.5), "subprocess_p95_ms": pct(sub, 0.95),
    }
    out["warm_over_subprocess"] = out["warm_exec_p50_ms"] / out["subprocess_p50_ms"]
    for c in (1, 8, 64):
        rate, fails = throughput(c, secs, sandboxed=True)
        sub_rate, _ = throughput(c, secs, sandboxed=False)
        out[f"execs_per_s_c{c}"], out[f"failures_c{c}"] = rate, fails
        out[f"subprocess_per_s_c{c}"] = sub_rate
    out["idle_mb_per_sandbox"], out["idle_cgroup_mb_per_sandbox"] = idle_memory_mb(
        8 if quick else 32)
    acquire, release = pool_cycle(n_cold)
    out["pool_acquire_exec_p50_ms"] = pct(acquire, 0.5)
    out["pool_release_p50_ms"] = pct(release, 0.5)
    out.update(docker_rows(quick, time_calls, pct))
    if "docker_cold_start_p50_ms" in out:
        out["docker_cold_over_bwrap"] = out["docker_cold_start_p50_ms"] / out["cold_start_p50_ms"]
        out["docker_warm_over_bwrap"] = out["docker_warm_exec_p50_ms"] / out["warm_exec_p50_ms"]
    out["machine"] = {"cpus": os.cpu_count(), "loadavg_1m_at_end": os.getloadavg()[0],
                      "kernel": platform.release(), "quick": quick}
    out["cpu"] = cpu()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "fewer samples (< 2 minutes)")
    args = ap.parse_args()
    out = run(args.quick)
    for key, value in out.items():
        if key != "machine":
            print(f"{key:28s} {value:10.2f}" if isinstance(value, float | int) else f"{key:28s} {value}")
    print(f"machine: {out['machine']}")
    write_json(args.json, out)


if __name__ == "__main__":
    main()
