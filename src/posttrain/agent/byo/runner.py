"""Bring-your-own-agent episodes: the user's agent program runs as a subprocess per episode and
acts only through the rollout endpoint (byo/endpoint.py), which samples from the engine and runs
tools in the episode's sandbox. Jobs in and Episodes out as in agent/loop.py's run_episodes, and
the same verdict: the task's tests run in the sandbox once the program is done.

How an episode ends: the program exits (0, or after it submitted, ran out of turns or over the
context: as the loop ends; otherwise `model_error` with its stderr's tail), or it outlives the
task's agent timeout (`agent_timeout`: its process group is killed). A program that lingers
after its episode is over is killed GRACE_S later.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

from posttrain.agent.byo.endpoint import RolloutEndpoint
from posttrain.agent.byo.session import Session
from posttrain.agent.config import AgentConfig
from posttrain.agent.harness import harness_for
from posttrain.agent.live import Live, finish
from posttrain.agent.trial import open_task_sandbox
from posttrain.engine.base import Engine, SamplingParams
from posttrain.tasks import Task
from posttrain.types import Episode

GRACE_S = 5.0           # an agent whose episode is over gets this long to exit on its own
STDERR_TAIL = 2000      # characters of a failed agent's stderr kept in Episode.error


def run_byo_episodes(jobs: list[tuple[Task, int]], engine: Engine, framer, params: SamplingParams,
                     cfg: AgentConfig, agent_command: list[str], env: dict[str, str] | None = None,
                     tracer=None, progress: Callable[[int], None] | None = None) -> list[Episode]:
    """Run one episode per (task, group_id) with `agent_command` (an argv) as the agent, up to
    cfg.workers at a time; returns them in the same order. `env`: more variables for the program;
    `tracer`: agent/traces.py's, or None; `progress`: told 1 as each episode finishes."""
    seen: Counter = Counter()
    lives = []
    for task, gid in jobs:   # slot: its place in a GRPO group, so each samples on its own stream
        lives.append(Live(task, Episode(task.id, gid), None, slot=seen[task.id, gid]))
        seen[task.id, gid] += 1
    engine_lock = nullcontext() if engine.concurrent or engine.shares_steps else threading.Lock()
    with RolloutEndpoint() as endpoint, ThreadPoolExecutor(cfg.workers) as pool:
        def one(live: Live) -> None:
            _episode(live, endpoint, framer, engine, params, cfg, engine_lock, agent_command,
                     env or {})
            if progress is not None:
                progress(1)
        list(pool.map(one, lives))
    if tracer is not None:
        for live in lives:
            tracer.export(live.episode)
    return [lv.episode for lv in lives]


def _episode(live: Live, endpoint: RolloutEndpoint, framer, engine: Engine,
             params: SamplingParams, cfg: AgentConfig, engine_lock, command: list[str],
             env: dict[str, str]) -> None:
    t0 = time.perf_counter()
    try:     # a broken environment is an infra error, not the agent's failure
        live.harness = harness_for(live.task, "tools", framer)  # the OpenAI API speaks tool calls
        live.sandbox = open_task_sandbox(live.task, cfg.sandbox_backend)
    except Exception as e:
        live.episode.status, live.episode.error = "infra_error", str(e)
    live.episode.timings["sandbox_start_s"] = time.perf_counter() - t0
    if live.sandbox is not None:
        session = Session(live, framer, engine, params, cfg, engine_lock)
        key = endpoint.register(session)
        try:
            _run_agent(session, command, {**env, **_agent_env(endpoint.url, key, live.task)})
        finally:
            endpoint.unregister(key)
            session.close()
    finish(live, None, False)


def _agent_env(url: str, key: str, task: Task) -> dict[str, str]:
    no_proxy = ",".join(x for x in ("127.0.0.1", "localhost", os.environ.get("NO_PROXY")) if x)
    return {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": key, "NO_PROXY": no_proxy,
            "no_proxy": no_proxy, "POSTTRAIN_TASK_ID": task.id,
            "POSTTRAIN_TASK_INSTRUCTION": task.instruction}


def _run_agent(session: Session, command: list[str], env: dict[str, str]) -> None:
    """Run the program to its end, its deadline, or GRACE_S past its episode's end; then set
    the episode's status from how it ended."""
    ep = session.episode
    timeout_s = float(session.live.task.config.agent.timeout_sec)
    with tempfile.TemporaryDirectory(prefix="posttrain-byo-") as cwd, \
            tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(command, cwd=cwd, env={**os.environ, **env},
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)     # its own group: killed as one
        try:
            ended = _wait(proc, session, t0 + timeout_s)
        finally:
            _kill_group(proc)           # what it left running dies with it
        ep.timings["agent_s"] = time.perf_counter() - t0
        err.seek(0)
        tail = err.read().decode("utf-8", errors="replace")[-STDERR_TAIL:]
    if ep.status != "ok":               # the session ended it (infra_error, context_overflow)
        return
    if ended == "timeout":
        ep.status, ep.error = "agent_timeout", f"the agent ran past {timeout_s:g} s and was killed"
    elif ended == "exited" and proc.returncode != 0 and not session.over:
        ep.status, ep.error = "model_error", f"the agent exited {proc.returncode}: {tail}"


def _wait(proc: subprocess.Popen, session: Session, deadline: float) -> str:
    """"exited", "timeout" (past the deadline) or "over" (lingered GRACE_S after its end)."""
    over_at = None
    while proc.poll() is None:
        now = time.perf_counter()
        if session.over and over_at is None:
            over_at = now
        if now >= deadline:
            return "timeout"
        if over_at is not None and now - over_at > GRACE_S:
            return "over"
        time.sleep(0.05)
    return "exited"


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
