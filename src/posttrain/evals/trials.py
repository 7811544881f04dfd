"""One eval trial through the tool-calling agent: sandbox, agent phase, verifier, record.

Also the helpers both protocols share: applying the job's timeout overrides to a task
and reading the verifier's files out of a sandbox before it is closed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

from posttrain.agent.checkpoint import EpisodeStore
from posttrain.agent.trial import sandbox_spec, verify
from posttrain.evals import taxonomy
from posttrain.agent.harness.chatclient import ChatClient
from posttrain.evals.conditions import EvalConditions
from posttrain.evals.jobdir import now_iso
from posttrain.evals.record import TrialOutput, TrialRecord
from posttrain.agent.harness.toolagent import AgentLimits, eval_harness, run_agent
from posttrain.agent.harness.toolcheckpoint import ToolCheckpoints
from posttrain.sandbox import Sandbox
from posttrain.sandbox.environment import prepare_environment
from posttrain.sandbox.pool import SandboxPool
from posttrain.tasks import Task

MAX_VERIFIER_FILE_BYTES = 64 * 1024


def with_timeouts(task: Task, c: EvalConditions) -> Task:
    """The task with the job's agent/verifier timeouts applied where the job sets them."""
    cfg = task.config
    if c.agent_timeout_s is not None:
        cfg = cfg.model_copy(update={"agent": cfg.agent.model_copy(
            update={"timeout_sec": float(c.agent_timeout_s)})})
    if c.verifier_timeout_s is not None:
        cfg = cfg.model_copy(update={"verifier": cfg.verifier.model_copy(
            update={"timeout_sec": float(c.verifier_timeout_s)})})
    return replace(task, config=cfg)


class TaskSandboxes:
    """Sandboxes for trials from one warm pool shared by the job: acquire applies the task's
    environment; release resets the sandbox (processes killed, /app /tmp /logs emptied)
    and keeps it warm for the next trial."""

    def __init__(self, tasks: list[Task], backend: str, warm: int, shared=None, kind: str = "eval"):
        specs = [sandbox_spec(t) for t in tasks]
        common = max(specs, key=specs.count) if specs else None
        self.pool = SandboxPool(common, backend, warm=warm, max_total=max(64, 2 * warm),
                                shared=shared, kind=kind)

    def acquire(self, task: Task) -> Sandbox:
        sb = self.pool.acquire(task.domain or "default", sandbox_spec(task))
        try:
            prepare_environment(task.environment_dir, sb)
        except BaseException:
            self.pool.release(sb, reuse=False)
            raise
        return sb

    def release(self, sandbox: Sandbox) -> None:
        self.pool.release(sandbox)

    def close(self) -> None:
        self.pool.close()


def verifier_files(sandbox: Sandbox, test_output: str) -> dict[str, str]:
    """Text files the verifier left in /logs/verifier, plus the test script's output."""
    files = {"test-output.txt": test_output}
    d = Path(sandbox.verifier_path("/logs/verifier"))
    for p in sorted(d.glob("*")) if d.is_dir() else []:
        if p.is_file() and p.stat().st_size <= MAX_VERIFIER_FILE_BYTES:
            files[p.name] = p.read_text(encoding="utf-8", errors="replace")
    return files


def run_tool_trial(task: Task, attempt: int, client: ChatClient, c: EvalConditions,
                   sandboxes: TaskSandboxes, gate=None, store: EpisodeStore | None = None) -> TrialOutput:
    """Run one attempt; never raises for a trial-level failure, records it instead. gate: the
    commands that wait for a reviewer (--approve); store: per-turn checkpoints, the attempt
    resumed from its last one (the caller drops it once the trial is written)."""
    task = with_timeouts(task, c)
    rec = TrialRecord(task.id, attempt, "infra_error", None, started_at=now_iso())
    t0 = time.perf_counter()
    files: dict[str, str] = {}
    run = None
    try:
        sandbox = sandboxes.acquire(task)
    except Exception as e:  # the environment could not be built: not the model's fault
        rec.error = f"sandbox setup failed: {type(e).__name__}: {e}"
        if getattr(e, "log_tail", None):        # a failed image build: its log's tail
            files["build-log-tail.txt"] = e.log_tail
        return _finish(rec, t0, run, files, c)
    rec.timings["setup_s"] = time.perf_counter() - t0
    preempted = PreemptionWatch(sandboxes.pool.preempted(sandbox), sandbox)
    try:
        limits = AgentLimits(c.max_turns, float(task.config.agent.timeout_sec), c.command_timeout_s,
                             c.observation_budget,
                             {"temperature": c.temperature, "top_p": c.top_p,
                              "max_tokens": c.max_reply_tokens, "seed": c.seed * 1000 + attempt})
        saves = None if store is None else ToolCheckpoints(store, (task.id, attempt, 0))
        run = run_agent(task.instruction, sandbox, client, limits, eval_harness(task, c.tools), gate,
                        (task.id, attempt), saves)
        t1 = time.perf_counter()
        verdict = verify(task, sandbox)
        rec.timings["verifier_s"] = time.perf_counter() - t1
        output = verdict.result.stdout + verdict.result.stderr if verdict.result else ""
        files = verifier_files(sandbox, output)
        episode_status = run.status if run.status != "ok" else verdict.status
        reward = verdict.reward if verdict.status == "ok" else None
        rec.status = taxonomy.classify(episode_status, reward)
        rec.reward, rec.reward_details = reward, verdict.details
        rec.error = run.error or verdict.error
    except Exception as e:
        rec.status, rec.error = "infra_error", f"{type(e).__name__}: {e}"
    finally:
        preempted.set_done()
        sandboxes.release(sandbox)
    if preempted.happened:  # higher-priority work took the slot: run again later, not scored
        rec.status, rec.reward, rec.error = "preempted", None, "preempted by higher-priority work"
    return _finish(rec, t0, run, files, c)


class PreemptionWatch:
    """Closes the sandbox (killing the trial's processes) as soon as its shared slot is
    preempted; `happened` says whether it was."""

    def __init__(self, event: threading.Event | None, sandbox: Sandbox):
        self.event, self.sandbox, self.done = event, sandbox, threading.Event()
        if event is not None:
            threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        while not self.done.is_set():
            if self.event.wait(0.02):
                self.sandbox.close()
                return

    def set_done(self) -> None:
        self.done.set()

    @property
    def happened(self) -> bool:
        return self.event is not None and self.event.is_set()


def _finish(rec: TrialRecord, t0: float, run, files: dict, c: EvalConditions) -> TrialOutput:
    rec.timings["total_s"] = time.perf_counter() - t0
    rec.finished_at = now_iso()
    trajectory = {"agent": "posttrain-tools", "model": c.model, "task": rec.task_name,
                  "attempt": rec.attempt, "messages": [], "turns": []}
    if run is not None:
        rec.n_input_tokens, rec.n_output_tokens = run.prompt_tokens, run.completion_tokens
        rec.context_tokens = run.turns[-1]["prompt_tokens"] + run.turns[-1]["completion_tokens"] \
            if run.turns else 0
        rec.n_turns, rec.n_malformed = len(run.turns), run.n_malformed
        rec.timings["model_s"], rec.timings["sandbox_s"] = run.model_s, run.sandbox_s
        trajectory["messages"], trajectory["turns"] = run.messages, run.turns
        trajectory["submitted"] = run.submitted
        if run.approvals:
            trajectory["approvals"] = run.approvals
        if run.checkpoints:
            trajectory["checkpoints"] = run.checkpoints
    return TrialOutput(rec, trajectory, files)
