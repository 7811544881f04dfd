"""Run an eval job: every (task, attempt) not yet on disk, infra retries, results as they finish.

An executor turns (task, attempt) pairs into finished TrialOutputs, yielding each as soon
as it is done: ToolExecutor (threads over an HTTP endpoint) or textrun.TextExecutor
(lockstep batches on the embedded engine). The runner writes each trial atomically and
rewrites the job summary after it, so a killed job loses at most the trials in flight.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol

from posttrain.agent.checkpoint import EpisodeStore
from posttrain.evals import taxonomy
from posttrain.agent.harness.chatclient import ChatClient
from posttrain.evals.conditions import EvalConditions
from posttrain.evals.jobdir import JobDir
from posttrain.evals.pricing import Price, trial_cost
from posttrain.evals.record import TrialOutput, TrialRecord
from posttrain.evals.summary import summarize
from posttrain.evals.trials import TaskSandboxes, run_tool_trial
from posttrain.tasks import Task


class Executor(Protocol):
    def run(self, items: list[tuple[Task, int]]) -> Iterator[TrialOutput]: ...


@dataclass
class ToolExecutor:
    """Trials over an OpenAI-compatible endpoint, n_jobs at a time on threads."""

    client: ChatClient
    conditions: EvalConditions
    sandboxes: TaskSandboxes
    n_jobs: int
    gate: object = None     # --approve: agent/approval.py's Gate
    store: EpisodeStore | None = None   # per-turn checkpoints of the trials in flight

    def run(self, items: list[tuple[Task, int]]) -> Iterator[TrialOutput]:
        with ThreadPoolExecutor(self.n_jobs) as pool:
            futures = [pool.submit(run_tool_trial, t, a, self.client, self.conditions,
                                   self.sandboxes, self.gate, self.store) for t, a in items]
            try:
                for f in as_completed(futures):
                    out = f.result()
                    yield out
                    if self.store is not None:   # the caller has written this trial by now
                        self.store.drop((out.record.task_name, out.record.attempt, 0))
            except BaseException:   # Ctrl-C: trials not started and open questions would keep
                for f in futures:   # the pool from closing
                    f.cancel()
                if self.gate is not None:
                    self.gate.approver.cancel()
                raise


def pending_trials(tasks: list[Task], k: int, done: set[tuple[str, int]]) -> list[tuple[Task, int]]:
    return [(t, a) for t in tasks for a in range(k) if (t.id, a) not in done]


def trial_config(c: EvalConditions, task: Task, attempt: int) -> dict:
    cond = {k: v for k, v in c.to_dict().items() if k != "task_ids"}
    return {"task": {"name": task.id, "path": str(task.path)}, "attempt": attempt,
            "conditions": cond}


def run_job(job: JobDir, tasks: list[Task], c: EvalConditions, executor: Executor,
            prices: dict[str, Price] | None = None, n_jobs: int = 1,
            on_trial: Callable[[TrialRecord], None] | None = None) -> dict:
    """Run what is missing, write each trial as it finishes; return the final summary."""
    records = job.records()
    queue = pending_trials(tasks, c.k, {(r.task_name, r.attempt) for r in records})
    by_id = {t.id: t for t in tasks}
    retries: dict[tuple[str, int], int] = {}
    t0, ran = time.perf_counter(), 0
    while queue:
        again = []
        for out in executor.run(queue):
            rec = out.record
            key = (rec.task_name, rec.attempt)
            if rec.status == "preempted":   # its slot went to higher-priority work: again, later
                again.append((by_id[rec.task_name], rec.attempt))
                continue
            if taxonomy.is_retryable(rec.status) and retries.get(key, 0) < c.max_infra_retries:
                retries[key] = retries.get(key, 0) + 1
                again.append((by_id[rec.task_name], rec.attempt))
                continue
            rec.infra_retries = retries.get(key, 0)
            rec.cost_usd = trial_cost(prices or {}, c.model, rec.n_input_tokens, rec.n_output_tokens)
            job.write_trial(out, trial_config(c, by_id[rec.task_name], rec.attempt))
            records.append(rec)
            ran += 1
            job.write_summary(summarize(records, c, len(tasks), _last_run(t0, ran, n_jobs)))
            if on_trial:
                on_trial(rec)
        queue = again
    summary = summarize(sorted(records, key=lambda r: (r.task_name, r.attempt)), c, len(tasks),
                        _last_run(t0, ran, n_jobs))
    job.write_summary(summary)
    return summary


def _last_run(t0: float, ran: int, n_jobs: int) -> dict:
    wall = time.perf_counter() - t0
    return {"wall_s": round(wall, 2), "trials_run": ran, "jobs": n_jobs,
            "trials_per_min": round(60 * ran / wall, 2) if wall > 0 else 0.0}
