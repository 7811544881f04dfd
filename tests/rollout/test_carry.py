"""Partial rollouts (`carry_staleness`): a straggler the batches went without is trained in a
later batch instead of dropped, no group is lost or trained twice, nothing is trained past
max_staleness + carry_staleness, and issuing still follows max_staleness."""

import json
import threading

import pytest

from posttrain.rollout.config import RolloutConfig
from posttrain.rollout.envs import Environment
from posttrain.rollout.events import EventLog
from posttrain.rollout.pipeline import Pipeline
from posttrain.schedule.sampler import TaskSampler
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig

B, S = 2, 1   # groups per step, issue bound


class HeldEnv(Environment):
    """The real env, except that the group of uid `held` returns only once `release` is set."""

    def __init__(self, env, held: int):
        self.env, self.held, self.release = env, held, threading.Event()
        self.group_size, self.task_ids = env.group_size, env.task_ids

    def run(self, jobs, engine):
        out = self.env.run(jobs, engine)   # generated now, at the version of the moment
        if any(j.uid == self.held for j in jobs):
            assert self.release.wait(timeout=60)
        return out


def _run(make_parts, tmp_path, carry: int, steps: int = 5, **cfg):
    env, model, engine = make_parts()
    held = HeldEnv(env, held=0)
    rc = RolloutConfig(steps=steps, groups_per_step=B, group_size=env.group_size, max_staleness=S,
                       carry_staleness=carry, workers=6, groups_per_wave=1, overprovision=cfg.pop("over", 0),
                       filter_zero_variance=False, **cfg)
    pipe = Pipeline(held, engine, PolicyTrainer(model, 0, OptimConfig(lr=1e-2)), TaskSampler(env.task_ids, 0),
                    rc, RLConfig(tis="token"), EventLog(tmp_path / "events.jsonl"))
    rows = []

    def on_step(step, stats):
        rows.append(stats)
        if step == S:   # the version is now S + 1: the held group, sampled at 0, is past the bound
            held.release.set()
            with pipe.cond:
                assert pipe.cond.wait_for(lambda: 0 not in pipe.in_flight, timeout=60)

    pipe.run(on_step)
    pipe.events.close()
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").open()]
    return pipe, rows, events


def _issued_within_the_bound(events, over: int) -> bool:
    """Every issue left taken + outstanding within (version + 1 + S) * B + over."""
    issued = 0
    for e in events:
        if e["event"] == "issue":
            issued += 1
            if issued > (e["version"] + 1 + S) * B + over:
                return False
    return True


def test_a_carried_straggler_is_trained_later_and_nothing_is_lost_or_trained_twice(make_parts, tmp_path):
    pipe, rows, events = _run(make_parts, tmp_path, carry=1)
    trained = {u: e["step"] for e in events if e["event"] == "train" for u in e["uids"]}
    all_trained = [u for e in events if e["event"] == "train" for u in e["uids"]]
    assert len(all_trained) == len(set(all_trained))
    assert trained[0] > S                          # after batches that went without it
    finish = next(e for e in events if e["event"] == "finish" and e["uid"] == 0)
    assert trained[0] - finish["version_min"] == S + 1   # trained past the issue bound
    assert not any(e["event"] == "drop" for e in events)
    assert all(r["staleness_max"] <= S + 1 for r in rows)
    assert sum(r["groups_carried"] for r in rows) >= 1 and pipe.tokens["carried"] > 0
    assert pipe.tokens.get("stale", 0) == 0
    assert pipe.audit()["lost"] == []
    assert _issued_within_the_bound(events, over=0)


def test_without_carry_the_straggler_is_dropped_as_stale(make_parts, tmp_path):
    pipe, rows, events = _run(make_parts, tmp_path, carry=0)
    dropped = [u for e in events if e["event"] == "drop" for u in e["uids"]]
    assert dropped == [0]
    assert 0 not in {u for e in events if e["event"] == "train" for u in e["uids"]}
    assert all(r["staleness_max"] <= S for r in rows)
    assert pipe.tokens["stale"] > 0 and pipe.tokens.get("carried", 0) == 0
    assert pipe.audit()["lost"] == []


@pytest.mark.parametrize("hedge_after", [0.0, 0.75])
def test_carry_with_over_provisioning_loses_nothing_and_keeps_its_bounds(make_parts, tmp_path, hedge_after):
    """Over-provisioned groups (fixed or as hedges) beside a carried straggler: each issued group
    is trained at most once, or still held at the end, and none is trained past S + 1."""
    pipe, rows, events = _run(make_parts, tmp_path, carry=1, steps=6, over=B, hedge_after=hedge_after)
    all_trained = [u for e in events if e["event"] == "train" for u in e["uids"]]
    assert len(all_trained) == len(set(all_trained)) and 0 in all_trained
    assert all(r["staleness_max"] <= S + 1 for r in rows)
    assert pipe.audit()["lost"] == []
    assert _issued_within_the_bound(events, over=B)
