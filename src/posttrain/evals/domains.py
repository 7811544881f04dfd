"""Per-domain and per-difficulty results: the task-clustered mean and CI of each group.

Groups come from each task's metadata (`domain`, `difficulty`), recorded in the job's
conditions as `task_groups` when the job starts, so report and compare see them too.
"""

from __future__ import annotations

from posttrain.evals import stats
from posttrain.tasks import Task


def task_groups(tasks: list[Task]) -> tuple[tuple[str, str, str], ...]:
    """(task id, domain, difficulty) for each task; '-' where the metadata has none."""
    return tuple((t.id, t.domain or "-", str(t.config.metadata.get("difficulty", "-")))
                 for t in tasks)


def _ci(scores: dict[str, list[float]]) -> dict:
    ci = stats.clustered_mean_ci(scores)
    return {"n_tasks": len(scores), "mean": ci.mean, "ci_low": ci.ci_low, "ci_high": ci.ci_high}


def per_domain(scores: dict[str, list[float]], groups) -> dict:
    """{domain: {n_tasks, mean, ci_low, ci_high, by_difficulty: {level: {...}}}}."""
    out: dict[str, dict] = {}
    by: dict[str, dict[str, dict[str, list[float]]]] = {}
    for task_id, domain, level in groups:
        if task_id in scores:
            by.setdefault(domain, {}).setdefault(level, {})[task_id] = scores[task_id]
    for domain, levels in sorted(by.items()):
        merged = {t: v for lv in levels.values() for t, v in lv.items()}
        out[domain] = _ci(merged) | {"by_difficulty": {lv: _ci(s) for lv, s in sorted(levels.items())}}
    return out
