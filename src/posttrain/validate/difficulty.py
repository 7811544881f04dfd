"""Difficulty calibration: k episodes per task with a given policy (any Engine).

With c successes out of n episodes: c == n is `too easy` (a GRPO group all 1 teaches
nothing), c == 0 is `too hard` (all 0, no signal either), anything else `learnable`.
pass@1 = c/n; pass@k is the unbiased estimator of evals/stats.py.
"""

from __future__ import annotations

from collections import Counter

from posttrain.agent.config import AgentConfig
from posttrain.agent.loop import run_episodes
from posttrain.engine.base import Engine, SamplingParams
from posttrain.evals.stats import pass_at_k
from posttrain.tasks import Task

NO_VERDICT = ("infra_error",)


def label(successes: int, n: int) -> str:
    if n == 0:
        return "unknown"
    return "too easy" if successes == n else "too hard" if successes == 0 else "learnable"


def calibrate(tasks: list[Task], engine: Engine, framer, k: int, params: SamplingParams,
              cfg: AgentConfig, policy: str, threshold: float = 1.0,
              batch: int = 16) -> dict[str, dict]:
    """task id -> {policy, k, n, successes, pass@1, pass@k, label, statuses}."""
    jobs = [(t, g) for t in tasks for g in range(k)]
    episodes = []
    for i in range(0, len(jobs), batch):
        episodes += run_episodes(jobs[i:i + batch], engine, framer, params, cfg)
    out = {}
    for task in tasks:
        eps = [e for e in episodes if e.task_id == task.id]
        counted = [e for e in eps if e.status not in NO_VERDICT]
        c = sum(e.reward >= threshold - 1e-9 for e in counted)
        n = len(counted)
        out[task.id] = {"policy": policy, "k": k, "n": n, "successes": c,
                        "pass@1": c / n if n else None,
                        "pass@k": pass_at_k(n, c, min(k, n)) if n else None,
                        "label": label(c, n), "statuses": dict(Counter(e.status for e in eps))}
    return out
