"""`posttrain eval compare A B`: a paired, task-by-task comparison of two jobs, as HTML and JSON."""

from __future__ import annotations

from pathlib import Path

from posttrain.errors import PosttrainError
from posttrain.evals import plots, stats
from posttrain.evals.conditions import diff_conditions
from posttrain.evals.jobdir import open_existing, write_json
from posttrain.evals.report import esc, img, kv_table, page
from posttrain.evals.summary import summarize, task_scores

# Conditions that are expected to differ between the two sides of a comparison.
EXPECTED_TO_DIFFER = ("model", "protocol", "base_url", "model_digest")


def load_side(path: Path):
    job = open_existing(path)
    c, records = job.conditions(), job.records()
    return job, c, records, summarize(records, c, len(c.task_ids))


def write_comparison(a_path: Path, b_path: Path, out: Path | None = None):
    """Write the comparison page and JSON; returns (html path, PairedDiff, the JSON's dict)."""
    ja, ca, ra, sa = load_side(a_path)
    jb, cb, rb, sb = load_side(b_path)
    scores_a, scores_b = task_scores(ra, ca.denominator), task_scores(rb, cb.denominator)
    for path, scores in ((ja.path, scores_a), (jb.path, scores_b)):
        if not any(scores.values()):
            raise PosttrainError(f"{path} has no scored trials yet; nothing to compare")
    if not set(scores_a) & set(scores_b):
        raise PosttrainError(f"{ja.path} and {jb.path} share no scored tasks; nothing to compare")
    d = stats.paired_compare(scores_a, scores_b)
    sd = d.se * d.n_tasks ** 0.5
    mdd = stats.min_detectable_difference(d.n_tasks, sd) if sd > 0 else None
    other = [x for x in diff_conditions(ca, cb) if x.split(":")[0] not in EXPECTED_TO_DIFFER]
    result = {"a": str(ja.path), "b": str(jb.path), **d.to_dict(),
              "sd_of_differences": sd, "min_detectable_difference_80pct_power": mdd,
              "tasks_needed_for_observed_diff": (stats.tasks_needed(d.diff, sd)
                                                 if d.diff and sd > 0 else None),
              "conditions_differing": other}
    stem = out.with_suffix("") if out else ja.path / f"compare-{jb.path.name}"
    write_json(stem.with_suffix(".json"), result)
    common = sorted(set(scores_a) & set(scores_b))
    mean = (lambda v: sum(v) / len(v))
    f = (lambda x: "-" if x is None else f"{x:.4f}")
    body = kv_table([("A", ja.path.name), ("B", jb.path.name), ("tasks compared", d.n_tasks),
                     ("mean A / mean B", f"{f(d.mean_a)} / {f(d.mean_b)}"),
                     ("A - B (95% CI)", f"{f(d.diff)}  [{f(d.ci_low)}, {f(d.ci_high)}]"),
                     ("p-value (paired t)", f(d.p_value)), ("correlation of task means", f(d.correlation)),
                     ("smallest difference detectable (80% power)", f(mdd)),
                     ("tasks only in A / only in B", f"{d.only_a} / {d.only_b}")])
    if other:
        body += ("<p><b>Warning:</b> the jobs ran under different conditions besides the model: "
                 + esc("; ".join(other)) + "</p>")
    body += img(plots.pass_at_k_curve({"A": sa, "B": sb}), "pass@k")
    body += img(plots.paired_scatter([mean(scores_a[t]) for t in common],
                                     [mean(scores_b[t]) for t in common], ja.path.name, jb.path.name),
                "paired per-task means")
    body += img(plots.latency_breakdown({"A": sa["latency"]["mean_per_trial"],
                                         "B": sb["latency"]["mean_per_trial"]}), "latency")
    path = stem.with_suffix(".html")
    path.write_text(page(f"compare {ja.path.name} vs {jb.path.name}", body), encoding="utf-8")
    return path, d, result
