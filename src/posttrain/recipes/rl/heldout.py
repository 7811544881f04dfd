"""Held-out scores of single-turn envs: each task's rewards (and strict scores, where the
reward function gives them) before and after RL, and the paired difference by task."""

from __future__ import annotations

from collections import defaultdict

from posttrain.evals.stats import clustered_mean_ci, paired_gain
from posttrain.schedule.sampler import GroupJob

REWARD_BOUNDS = (0.0, 1.0)   # every single-turn reward (rollout.single_turn.REWARDS) is in [0, 1]


def single_turn_scores(env, engine, seed: int, progress=None) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """(rewards, strict scores) of each held-out prompt over its samples; strict is empty for a
    reward function without details. `progress(n)`: a group of n samples is scored."""
    jobs = [GroupJob(i, i, tid, seed + i) for i, tid in enumerate(env.task_ids)]
    rewards: dict[str, list[float]] = defaultdict(list)
    strict: dict[str, list[float]] = defaultdict(list)
    for group in env.run(jobs, engine):
        if progress is not None:
            progress(len(group))
        for e in group:
            rewards[e.task_id].append(e.reward)
            if "strict" in e.reward_details:
                strict[e.task_id].append(e.reward_details["strict"])
    return dict(rewards), dict(strict)


def single_turn_eval(env, engine, seed: int, progress=None) -> dict:
    """Mean reward with its task-clustered 95% CI; with strict scores also their mean, and each
    task's scores (what `heldout_gain` pairs, kept so a resumed run can still pair them)."""
    rewards, strict = single_turn_scores(env, engine, seed, progress)
    ci = clustered_mean_ci(rewards, bounds=REWARD_BOUNDS)
    out = {"reward_mean": ci.mean, "ci_low": ci.ci_low, "ci_high": ci.ci_high,
           "n_tasks": ci.n_tasks, "k": env.group_size, "temperature": env.temperature}
    if strict:
        out |= {"strict_mean": clustered_mean_ci(strict).mean, "scores": rewards,
                "strict_scores": strict}
    return out


def heldout_gain(before: dict, after: dict) -> dict:
    """After - before on the same held-out tasks (evals.stats.paired_gain: paired by task, 95%
    CI): sandbox tasks' pass@1; single-turn tasks' partial score, and the strict one beside it. Empty unless both evals kept their
    per-task scores."""
    if "scores" not in before or "scores" not in after:
        return {}
    if "pass_at_1" in before:       # sandbox tasks: pass@1, paired by task
        return {"heldout_before": before["pass_at_1"], "heldout_after": after["pass_at_1"],
                **paired_gain(before["scores"], after["scores"])}
    strict = paired_gain(before["strict_scores"], after["strict_scores"], "paired_strict")
    return {"heldout_partial_before": before["reward_mean"], "heldout_partial_after": after["reward_mean"],
            "heldout_strict_before": before["strict_mean"], "heldout_strict_after": after["strict_mean"],
            **paired_gain(before["scores"], after["scores"]),
            **{k: strict[k] for k in ("paired_strict_diff", "paired_strict_ci_low", "paired_strict_ci_high")}}
