"""Per-domain and per-difficulty results in the eval summary, from the job's task groups."""

from posttrain.evals.conditions import EvalConditions
from posttrain.evals.domains import per_domain
from posttrain.evals.record import TrialRecord
from posttrain.evals.summary import summarize


def test_per_domain_groups_by_domain_and_difficulty():
    groups = (("a", "finance", "easy"), ("b", "finance", "hard"), ("c", "longctx", "easy"))
    scores = {"a": [1.0, 1.0], "b": [0.0, 1.0], "c": [0.0, 0.0]}
    d = per_domain(scores, groups)
    assert d["finance"]["n_tasks"] == 2 and d["finance"]["mean"] == 0.75
    assert d["finance"]["by_difficulty"]["hard"]["mean"] == 0.5
    assert d["longctx"]["mean"] == 0.0 and d["longctx"]["ci_low"] == 0.0
    assert d["finance"]["ci_low"] <= 0.75 <= d["finance"]["ci_high"]


def test_summary_reports_per_domain_and_conditions_round_trip():
    groups = (("a", "finance", "easy"), ("b", "cad", "medium"))
    c = EvalConditions(model="m", protocol="text", k=1, task_ids=("a", "b"), task_groups=groups)
    assert EvalConditions.from_dict(c.to_dict()) == c
    recs = [TrialRecord("a", 0, "passed", 1.0), TrialRecord("b", 0, "failed", 0.25)]
    s = summarize(recs, c, 2)
    assert s["per_domain"]["cad"]["mean"] == 0.25
    assert set(s["per_domain"]["finance"]["by_difficulty"]) == {"easy"}
