"""Fault injection: during an eval, the engine server is SIGKILLed (and started again at once)
at random points, and so is the sandbox backend of a running trial (its bwrap process, or its
docker container). Every trial must end as the uninterrupted run's did, or as an error; a
trial whose reward differs without an error is misrecorded."""

from __future__ import annotations

import random
import subprocess
import threading
import time
from pathlib import Path

import psutil

from parts.agent_rt_setup import eval_argv, outcomes, start_eval, trials
from posttrain.sandbox.docker.cli import LABEL

SCORED = ("passed", "failed")


def _kill_a_sandbox(eval_pid: int, backend: str, rng: random.Random, wait_s: float = 20.0) -> str | None:
    """SIGKILL one running sandbox of the eval process, waiting up to wait_s for one to be
    open (none is between batches); what was killed, or None."""
    deadline = time.monotonic() + wait_s
    while (what := _kill_one(eval_pid, backend, rng)) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return what


def _kill_one(eval_pid: int, backend: str, rng: random.Random) -> str | None:
    if backend == "docker":
        ids = subprocess.run(["docker", "ps", "-q", "--filter", f"label={LABEL}={eval_pid}"],
                             capture_output=True, text=True).stdout.split()
        if ids:
            subprocess.run(["docker", "kill", rng.choice(ids)], capture_output=True)
            return "container"
        return None
    try:
        procs = [p for p in psutil.Process(eval_pid).children(recursive=True) if p.name() == "bwrap"]
    except psutil.Error:            # the eval ended meanwhile
        return None
    if procs:
        rng.choice(procs).kill()
        return "bwrap"
    return None


def _injector(proc, server, backend: str, points: list[tuple[int, str]], rng: random.Random,
              log: list[dict]) -> None:
    """Each fault once the server has been asked for its number of sequences in this run."""
    start = server.sequences()
    for at, kind in points:
        while proc.poll() is None and server.sequences() - start < at:
            time.sleep(0.01)
        if proc.poll() is not None:
            return
        if kind == "engine":
            server.kill()
            log.append({"kind": "engine", "after_sequences": at, "restart_s": round(server.start(), 2)})
        else:
            log.append({"kind": "sandbox", "after_sequences": at, "killed": _kill_a_sandbox(proc.pid, backend, rng)})


def fault_points(whole_sequences: int, faults: int, rng: random.Random) -> list[tuple[int, str]]:
    """`faults` engine and `faults` sandbox kills at random points of the run, in order."""
    kinds = ["engine"] * faults + ["sandbox"] * faults
    rng.shuffle(kinds)
    ats = sorted(rng.sample(range(1, max(2 * faults + 1, int(0.8 * whole_sequences))), 2 * faults))
    return list(zip(ats, kinds))


def fault_injection(server, tasks: Path, ckpt: Path, out: Path, backend: str, size: dict,
                    rng: random.Random, whole_sequences: int) -> dict:
    """Needs the kill-and-resume section's uninterrupted job (jobs/<backend>-whole) as the
    reference, and the sequences it took (where the faults are placed)."""
    k, jobs, turns = size["k"], size["jobs"], size["max_turns"]
    job = out / "jobs" / f"{backend}-faults"
    proc = start_eval(eval_argv(tasks, ckpt, server.url, out / "jobs", job.name, backend, k, jobs, turns),
                      out / f"eval-{backend}-faults.log")
    log: list[dict] = []
    points = fault_points(whole_sequences, size["faults"], rng)
    thread = threading.Thread(target=_injector, args=(proc, server, backend, points, rng, log))
    thread.start()
    code = proc.wait(timeout=3600)
    thread.join()
    if server.proc.poll() is not None:
        server.start()
    whole, faulted = outcomes(out / "jobs" / f"{backend}-whole"), outcomes(job)
    misrecorded = sorted(n for n, (status, reward) in faulted.items()
                         if status in SCORED and (status, reward) != whole.get(n))
    records = trials(job).values()
    return {"eval_exit_code": code, "faults": log,
            "engine_kills": sum(1 for f in log if f["kind"] == "engine"),
            "sandbox_kills": sum(1 for f in log if f["kind"] == "sandbox" and f["killed"]),
            "faults_misrecorded": len(misrecorded), "misrecorded_trials": misrecorded,
            "trials": len(faulted), "errors": sum(1 for s, _ in faulted.values() if s not in SCORED),
            "infra_retries": sum(r.get("infra_retries", 0) for r in records),
            "equal_to_whole": sum(1 for n, o in faulted.items() if o == whole.get(n))}
