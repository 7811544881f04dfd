"""Exact shares: per-step exactness where B allows, bounded drift everywhere, bad shares."""

import logging
import random

import pytest

from posttrain.schedule.shares import ShareCarry, allocate, normalise


def test_exact_per_step_when_the_batch_allows():
    carry = ShareCarry({"a": 0.5, "b": 0.25, "c": 0.25})
    for _ in range(20):
        plan = carry.plan(8)
        assert plan == {"a": 4, "b": 2, "c": 2}
        carry.commit(8, plan)


@pytest.mark.parametrize("batch", [1, 3, 7, 64])
def test_running_totals_never_drift_by_a_group(batch):
    rng = random.Random(batch)
    raw = {f"d{i}": rng.random() for i in range(13)}
    shares = normalise(raw)
    carry, total = ShareCarry(shares), {d: 0 for d in shares}
    for step in range(1, 301):
        plan = carry.plan(batch)
        assert sum(plan.values()) == batch
        carry.commit(batch, plan)
        for d, c in plan.items():
            total[d] += c
            assert abs(total[d] - step * batch * shares[d]) < 1.0 + 1e-9


def test_a_short_batch_is_repaid_later():
    carry = ShareCarry({"a": 0.5, "b": 0.5})
    carry.commit(4, {"a": 4, "b": 0})          # b's groups were not ready: a filled in
    assert carry.plan(4) == {"a": 0, "b": 4}


def test_bad_shares(caplog):
    with caplog.at_level(logging.WARNING):
        assert normalise({"a": 2.0, "b": 2.0}) == {"a": 0.5, "b": 0.5}
    assert "normalised" in caplog.text
    for bad in ({}, {"a": 0.0}, {"a": -1.0, "b": 2.0}, {"a": float("nan")}):
        with pytest.raises(ValueError):
            normalise(bad)


def test_allocate_with_a_negative_carry_still_sums_to_n():
    counts, carry = allocate({"a": 0.01, "b": 0.99}, 1, {"a": -0.9, "b": 0.9})
    assert sum(counts.values()) == 1 and min(counts.values()) >= 0
