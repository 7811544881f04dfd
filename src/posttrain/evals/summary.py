"""The job summary (jobs/<job>/result.json) computed from its trial records.

Scores are per trial (taxonomy.score); which trials enter the denominator follows the
job's reported policy. Statistics come from evals.stats, clustered by task.
"""

from __future__ import annotations

from collections import Counter

from posttrain.evals import stats, taxonomy
from posttrain.evals.conditions import EvalConditions
from posttrain.evals.domains import per_domain
from posttrain.evals.record import TrialRecord


def task_scores(records: list[TrialRecord], policy: str) -> dict[str, list[float]]:
    """{task: [score of each counted trial]} (tasks whose trials were all excluded drop out)."""
    out: dict[str, list[float]] = {}
    for r in records:
        if taxonomy.counted(r.status, policy):
            out.setdefault(r.task_name, []).append(taxonomy.score(r.status, r.reward))
    return out


def _sum(records, key) -> float:
    return sum(r.timings.get(key, 0.0) for r in records)


def latency(records: list[TrialRecord]) -> dict:
    n = max(1, len(records))
    keys = ("setup_s", "model_s", "sandbox_s", "verifier_s", "total_s")
    return {"total": {k: round(_sum(records, k), 3) for k in keys},
            "mean_per_trial": {k: round(_sum(records, k) / n, 3) for k in keys}}


def tokens(records: list[TrialRecord]) -> dict:
    n_in = sum(r.n_input_tokens for r in records)
    n_out = sum(r.n_output_tokens for r in records)
    n = max(1, len(records))
    return {"input": n_in, "output": n_out, "mean_input_per_trial": round(n_in / n, 1),
            "mean_output_per_trial": round(n_out / n, 1)}


def cost(records: list[TrialRecord]) -> dict:
    priced = [r.cost_usd for r in records if r.cost_usd is not None]
    total = sum(priced) if priced else None
    return {"total_usd": total, "priced_trials": len(priced),
            "per_trial_usd": total / len(priced) if priced else None}


def summarize(records: list[TrialRecord], c: EvalConditions, n_tasks_planned: int,
              last_run: dict | None = None) -> dict:
    """Everything a reader needs to judge the job, as plain JSON."""
    scores = task_scores(records, c.denominator)
    counts = Counter(r.status for r in records)
    out = {
        "model": c.model, "protocol": c.protocol, "n_tasks": len(scores),
        "n_tasks_planned": n_tasks_planned, "k": c.k,
        "n_trials": len(records), "n_trials_planned": n_tasks_planned * c.k,
        "complete": len(records) == n_tasks_planned * c.k,
        "counts": {s: counts.get(s, 0) for s in taxonomy.STATUSES},
        "denominator": {"policy": c.denominator,
                        "counted": sum(len(v) for v in scores.values()),
                        "excluded": len(records) - sum(len(v) for v in scores.values())},
        "pass_at_k": {}, "pass_hat_k": {}, "mean_reward": None, "ci_low": None, "ci_high": None,
        "se": None, "ci_method": None, "confidence": 0.95,
        "tokens": tokens(records), "cost": cost(records), "latency": latency(records),
        "infra_retries": sum(r.infra_retries for r in records),
    }
    if scores:
        ci = stats.clustered_mean_ci(scores)
        curve = stats.pass_at_k_curve(scores)
        out["pass_at_k"] = {str(k): v for k, v in curve.items()}
        out["pass_hat_k"] = {str(k): stats.mean_pass_hat_k(scores, k) for k in curve}
        out.update(mean_reward=ci.mean, ci_low=ci.ci_low, ci_high=ci.ci_high, se=ci.se,
                   ci_method=ci.method, k_effective=ci.k)
    if last_run:  # this invocation only (a resumed job ran the rest earlier)
        out["last_run"] = last_run
    if scores and c.task_groups:
        out["per_domain"] = per_domain(scores, c.task_groups)
    out["per_task"] = {t: {"n": len(v), "mean": sum(v) / len(v),
                           "passes": sum(1 for s in v if s >= taxonomy.PASS_THRESHOLD)}
                       for t, v in sorted(scores.items())}
    return out
