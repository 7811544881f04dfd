"""Held-out pass@1 of a policy over k samples per task, with a task-clustered 95% CI."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, replace

from posttrain.agent.chat import ChatFramer
from posttrain.agent.config import AgentConfig
from posttrain.agent.episodes import run_agent_episodes
from posttrain.agent.stats import tool_stats
from posttrain.engine.base import Engine, SamplingParams
from posttrain.evals.stats import clustered_mean_ci
from posttrain.tasks import Task
from posttrain.types import Episode


def evaluate_pass_at_1(tasks: list[Task], engine: Engine, framer: ChatFramer, k: int,
                       params: SamplingParams, cfg: AgentConfig,
                       batch_episodes: int = 128, progress=None) -> tuple[dict, list[Episode]]:
    """Run k episodes per task; pass = reward >= 1. Returns the summary and the episodes.
    `progress(n)`: n more episodes finished (after every turn)."""
    jobs = [(t, i) for i, t in enumerate(tasks) for _ in range(k)]
    episodes: list[Episode] = []
    for start in range(0, len(jobs), batch_episodes):
        chunk = jobs[start:start + batch_episodes]
        seed = None if params.seed is None else params.seed + start
        episodes += run_agent_episodes(chunk, engine, framer, replace(params, seed=seed), cfg,
                                       progress=progress)
    scores = pass_scores(episodes)
    ci = asdict(clustered_mean_ci(scores))
    n = max(1, len(episodes))
    summary = {"pass_at_1": ci["mean"], "ci_low": ci["ci_low"], "ci_high": ci["ci_high"],
               "n_tasks": ci["n_tasks"], "k": k, "scores": scores,
               "reward_mean": sum(e.reward for e in episodes) / n,
               "turns_mean": sum(len(e.turns) for e in episodes) / n,
               **tool_stats(episodes)}
    return summary, episodes


def pass_scores(episodes: list[Episode]) -> dict[str, list[float]]:
    """Each task's passes (1.0 for reward >= 1) over its episodes: what pass@1 and paired
    comparisons are computed from."""
    scores: dict[str, list[float]] = defaultdict(list)
    for ep in episodes:
        scores[ep.task_id].append(1.0 if ep.reward >= 1.0 else 0.0)
    return dict(scores)

