"""Taxonomy, denominator policy and the job summary, on hand-made trial records."""

import pytest

from posttrain.evals import taxonomy
from posttrain.evals.conditions import EvalConditions, check_same, default_job_name
from posttrain.errors import ConfigError
from posttrain.evals.record import TrialRecord
from posttrain.evals.summary import summarize


def rec(task, attempt, status, reward, n_in=10, n_out=2, cost=None):
    return TrialRecord(task, attempt, status, reward, n_input_tokens=n_in, n_output_tokens=n_out,
                       cost_usd=cost, timings={"model_s": 1.0, "sandbox_s": 0.5, "total_s": 2.0})


def test_classify():
    assert taxonomy.classify("ok", 1.0) == "passed"
    assert taxonomy.classify("ok", 0.5) == "failed"
    assert taxonomy.classify("ok", None) == "infra_error"
    assert taxonomy.classify("verifier_error", None) == "infra_error"
    assert taxonomy.classify("agent_timeout", 1.0) == "agent_timeout"
    with pytest.raises(ValueError):
        taxonomy.classify("exploded", None)


def test_denominator_policies():
    records = [rec("a", 0, "passed", 1.0), rec("a", 1, "infra_error", None),
               rec("b", 0, "failed", 0.0), rec("b", 1, "model_error", None),
               rec("c", 0, "agent_timeout", 1.0), rec("c", 1, "passed", 1.0)]
    c = EvalConditions("m", "tools", k=2)
    s = summarize(records, c, 3)
    # all: a=[1,0] b=[0,0] c=[1,1] -> 3/6
    assert s["mean_reward"] == pytest.approx(0.5)
    assert s["denominator"] == {"policy": "all", "counted": 6, "excluded": 0}
    assert s["counts"]["agent_timeout"] == 1 and s["counts"]["infra_error"] == 1
    s = summarize(records, EvalConditions("m", "tools", k=2, denominator="exclude-infra"), 3)
    # exclude-infra: a=[1] b=[0,0] c=[1,1] -> 3/5; pass@k only up to the fewest samples (1)
    assert s["mean_reward"] == pytest.approx(0.6)
    assert s["denominator"] == {"policy": "exclude-infra", "counted": 5, "excluded": 1}
    assert list(s["pass_at_k"]) == ["1"]


def test_tokens_cost_latency():
    records = [rec("a", 0, "passed", 1.0, 100, 10, 0.5), rec("a", 1, "failed", 0.0, 50, 5, None)]
    s = summarize(records, EvalConditions("m", "tools", k=2), 1)
    assert s["tokens"]["input"] == 150 and s["tokens"]["output"] == 15
    assert s["cost"] == {"total_usd": 0.5, "priced_trials": 1, "per_trial_usd": 0.5}
    assert s["latency"]["mean_per_trial"]["model_s"] == 1.0
    assert s["complete"] and s["n_trials_planned"] == 2


def test_conditions_are_refused_when_changed_and_named_stably():
    a = EvalConditions("m", "tools", k=5, temperature=0.7)
    b = EvalConditions("m", "tools", k=5, temperature=0.2, max_turns=3)
    check_same(a, EvalConditions("m", "tools", k=5, temperature=0.7), "j")
    with pytest.raises(ConfigError, match="temperature: 0.7 -> 0.2; max_turns: 20 -> 3"):
        check_same(a, b, "j")
    assert default_job_name(a) == default_job_name(EvalConditions("m", "tools", k=5))
    assert default_job_name(a) != default_job_name(b)
    with pytest.raises(ConfigError):
        EvalConditions("m", "tools", k=0)
