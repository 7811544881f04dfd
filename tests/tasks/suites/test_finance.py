"""The finance suite: the ledger balances, the comparator is strict and never evaluates,
questions are redrawn near distractors, and validate passes good tasks and catches each
probe's weakened verifier."""

import json
import random
import shutil

import pytest

from posttrain.errors import PosttrainError
from posttrain.tasks.suites import generate
from posttrain.tasks.suites.finance import comparator
from posttrain.tasks.suites.finance.ledger import simulate
from posttrain.tasks.suites.finance.questions import Question, acceptable
from weakened import raised_by, validate_one, weaken

EXPECT = {"value": 1.2, "unit": "USD millions", "tolerance": 0.05}


@pytest.mark.parametrize("seed", range(20))
def test_statements_balance_for_every_seed(seed):
    c = simulate(random.Random(seed), "X Inc.", ["A", "B", "C"], 2019, 6)
    for m in c.metrics.values():
        assert m["total_assets"] == m["total_liabilities"] + m["total_equity"]
        assert m["revenue"] == sum(v for k, v in m.items() if k.startswith("revenue:"))
        assert m["net_income"] == m["revenue"] - m["cogs"] - m["operating_expenses"] - m["interest"] - m["tax"]


@pytest.mark.parametrize("text,reward", [
    ("1.2 USD millions", 1), ("1.23 usd  millions\n", 1), ("$1.24 USD millions", 1),
    ("-1.2 USD millions", 0), ("(1.2) USD millions", 0), ("1200 USD millions", 0),
    ("0.0012 USD millions", 0), ("1.2 USD billions", 0), ("1.2", 0), ("1.2 %", 0),
    ("1.2 USD millions\n1.3 USD millions", 0), ("1.26 USD millions", 0),
    ("__import__('os').system('true') USD millions", 0), ("6/5 USD millions", 0),
    ("1.2e0 USD millions", 0), ("nan USD millions", 0), ("", 0)])
def test_comparator_is_strict(text, reward):
    assert comparator.score(text, EXPECT)["reward"] == reward


def test_comparator_signs_and_separators():
    neg = {"value": -1234.5, "unit": "USD millions", "tolerance": 0.05}
    for text in ("-1,234.5 USD millions", "(1,234.5) USD millions", "\u22121234.5 USD millions"):
        assert comparator.score(text, neg)["reward"] == 1
    assert comparator.score("1,234.5 USD millions", neg)["reward"] == 0
    assert comparator.score("-1,23,4.5 USD millions", neg)["reward"] == 0


def test_near_distractor_rejects_a_question():
    from posttrain.tasks.suites.finance.render import Report

    q = Question("lookup", "?", 12.3, "%", 8.0, {"src"})
    rep = Report(None, "r.md", "", [(12.3, "src"), (40.0, None)])
    assert acceptable(q, [rep])
    rep.numbers.append((12.4, None))
    assert not acceptable(q, [rep])
    assert not acceptable(Question("growth", "?", 12.3, "%", 12.2), [])   # period too close
    assert not acceptable(Question("growth", "?", 0.2, "%", 5.0), [])     # sign flip too close


def test_generation_is_deterministic_and_knobs_are_checked(tmp_path):
    a = generate("finance", tmp_path / "a", 8, seed=3, knobs=["tokens=2000"])
    b = generate("finance", tmp_path / "b", 8, seed=3, knobs=["tokens=2000"])
    for ta, tb in zip(a, b):
        for p in ta.path.rglob("*"):
            if p.is_file():
                assert p.read_bytes() == (tb.path / p.relative_to(ta.path)).read_bytes()
    doc = next((a[0].path / "environment/app/reports").iterdir()).read_text()
    assert 1800 <= len(doc) / 4 <= 4000
    for bad in (["tokens=10"], ["families=lookup,nope"], ["colour=red"], ["tokens"]):
        with pytest.raises(PosttrainError):
            generate("finance", tmp_path / "c", 2, seed=0, knobs=bad)
    with pytest.raises(PosttrainError, match="unknown suite"):
        generate("fnance", tmp_path / "c", 2, seed=0)
    assert not list((tmp_path / "c").glob("*")) if (tmp_path / "c").exists() else True


def test_a_failing_build_leaves_no_task_directories(tmp_path, monkeypatch):
    from posttrain.tasks.suites.finance import suite

    real, calls = suite.make_task, []

    def fails_on_third(*a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("boom")
        return real(*a, **k)

    monkeypatch.setattr(suite, "make_task", fails_on_third)
    with pytest.raises(RuntimeError):
        generate("finance", tmp_path / "out", 5, seed=0)
    assert list((tmp_path / "out").iterdir()) == []


def test_good_tasks_validate_ok(tmp_path, quick_cfg):
    tasks = generate("finance", tmp_path / "t", 1, seed=5, knobs=["families=inconsistency"])
    for t in tasks:
        r = validate_one(t.path, tmp_path / "st", quick_cfg)
        assert r.status == "ok", r.reasons
        assert r.checks["mutation"].evidence["strength"] == 1.0


WEAK = {
    "number_sprayer": '''
def score(text, expected):   # containment at any common scale, unit ignored
    import re
    for tok in re.findall(r"-?[0-9][0-9,]*(?:\\.[0-9]+)?", text):
        v = float(tok.replace(",", ""))
        if any(abs(v * s - expected["value"]) <= expected["tolerance"] for s in (1, 1e3, 1e-3)):
            return {"reward": 1.0}
    return {"reward": 0.0}''',
    "sign_flip": '''
_strict = score
def score(text, expected):   # compares magnitudes
    value, unit = parse(text)
    ok = value is not None and abs(abs(value) - abs(expected["value"])) <= expected["tolerance"]
    return {"reward": float(ok)}''',
    "scale_up": '''
def score(text, expected):   # "1200 is 1.2 in other units"
    value, unit = parse(text)
    ok = value is not None and any(abs(value * s - expected["value"]) <= expected["tolerance"]
                                   for s in (1, 1e3, 1e-3))
    return {"reward": float(ok)}''',
    "period_shift": '''
def score(text, expected):   # 25% relative tolerance
    value, unit = parse(text)
    ok = value is not None and abs(value - expected["value"]) <= 0.25 * abs(expected["value"])
    return {"reward": float(ok)}''',
    "off_tolerance": '''
_strict = score
def score(text, expected):   # five times the stated tolerance
    return _strict(text, dict(expected, tolerance=5 * expected["tolerance"]))''',
}


@pytest.mark.parametrize("probe", [pytest.param(p, marks=[] if p == "sign_flip" else pytest.mark.slow)
                                   for p in WEAK])
def test_weakened_verifier_is_caught_by_its_probe(tmp_path, quick_cfg, probe):
    task = generate("finance", tmp_path / "t", 1, seed=11, knobs=["families=lookup"])[0]
    weaken(task.path, WEAK[probe])
    r = validate_one(task.path, tmp_path / "st", quick_cfg)
    assert r.status == "hackable", r.reasons
    assert probe in raised_by(r), raised_by(r)
    if probe == "scale_up":          # the same scale-blind comparator takes both directions
        assert "scale_down" in raised_by(r)
