"""What bench/agent_runtime.py's sections share: the tasks, a warm tiny policy, a real
`posttrain serve` process (killable, restartable on its port), and `posttrain eval` runs
against it as subprocesses, read back from their job directories."""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from posttrain.sandbox.reaper import reap

POSTTRAIN = [sys.executable, "-m", "posttrain"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_tasks(out: Path, n: int, seed: int) -> Path:
    from posttrain.tasks.suites import terminal_basics

    tasks = out / "tasks"
    if not tasks.is_dir():
        terminal_basics.generate(tasks, n, seed=seed, split="heldout")
    return tasks


def warm_policy(out: Path, sft_steps: int) -> Path:
    """The tiny policy SFT'd on terminal-basics oracle turns (as the curriculum bench builds it)."""
    from posttrain.models.tiny import save_policy
    from posttrain.recipes.rl.config import load_rl_config
    from posttrain.recipes.rl.env import build_env

    ckpt = out / "policy"
    if (ckpt / "config.json").is_file():
        return ckpt
    cfg = load_rl_config(None, [f'runs_dir="{out}"', "threads=1", "seed=0", 'tasks.kind="terminal-basics"',
                                f"policy.sft_steps={sft_steps}", "agent.max_turns=4"])
    parts = build_env(cfg, out / "warm", None)
    return save_policy(parts.model, parts.tokenizer, ckpt)


class Server:
    """`posttrain serve` in its own process group on a fixed port; kill() and start() again."""

    def __init__(self, ckpt: Path, log: Path):
        self.ckpt, self.port, self.log, self.proc = ckpt, free_port(), log, None
        self.earlier = 0        # sequences counted by the processes killed before this one

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 120.0) -> float:
        """Start and wait for /health; the seconds it took."""
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(POSTTRAIN + ["serve", "--model", str(self.ckpt), "--port", str(self.port),
                                                 "--threads", "1"], stdout=self.log.open("a"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        while time.perf_counter() - t0 < timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"posttrain serve exited ({self.proc.returncode}); see {self.log}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return time.perf_counter() - t0
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"posttrain serve did not come up in {timeout_s} s")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.earlier = self.sequences()
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def sequences(self) -> int:
        """Sequences the servers were asked to generate (their /metrics counters, summed)."""
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        line = next(x for x in text.splitlines() if x.startswith("posttrain_sequences_total "))
        return self.earlier + int(line.split()[1])


def eval_argv(tasks: Path, ckpt: Path, url: str, jobs_dir: Path, job: str, backend: str,
              k: int, jobs: int, max_turns: int) -> list[str]:
    return POSTTRAIN + ["eval", "--tasks", str(tasks), "--model", str(ckpt), "--base-url", f"{url}/v1",
                        "-k", str(k), "--jobs", str(jobs), "--job", job, "--jobs-dir", str(jobs_dir),
                        "--sandbox", backend, "--seed", "0", "--max-turns", str(max_turns)]


def start_eval(argv: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=log.open("a"), stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "COLUMNS": "200"})


def run_eval(argv: list[str], log: Path, timeout_s: float = 3600) -> float:
    t0 = time.perf_counter()
    proc = start_eval(argv, log)
    if proc.wait(timeout=timeout_s) != 0:
        raise RuntimeError(f"eval failed ({proc.returncode}); see {log}")
    return time.perf_counter() - t0


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process and its children; reclaim the sandboxes it left."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    reap()


def trials(job: Path) -> dict[str, dict]:
    """Each finished trial's record, by its directory name."""
    return {p.parent.name: json.loads(p.read_text()) for p in job.glob("*/result.json")
            if not p.parent.name.startswith(".")}


def outcomes(job: Path) -> dict[str, tuple[str, float | None]]:
    return {name: (r["status"], r["reward"]) for name, r in trials(job).items()}


def checkpoint_ms(job: Path) -> dict[str, list[float]]:
    """Every snapshot's and restore's milliseconds in the job's trajectories."""
    out: dict[str, list[float]] = {"snapshot": [], "restore": []}
    for p in job.glob("*/agent/trajectory.json"):
        for row in json.loads(p.read_text()).get("checkpoints", []):
            out[row["kind"]].append(row["ms"])
    return out


def p50(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 2) if xs else None
