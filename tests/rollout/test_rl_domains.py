"""The pipeline over the multi-domain scheduler on a real tiny model: every batch holds each
domain's share exactly, per-domain metrics, and groups lost to infra errors re-run."""

import json

import pytest

from posttrain.rollout.config import RolloutConfig
from posttrain.rollout.events import EventLog
from posttrain.rollout.pipeline import Pipeline
from posttrain.rollout.single_turn import similarity_reward
from posttrain.schedule.curriculum import CurriculumKnobs
from posttrain.schedule.scheduler import DomainTasks, Scheduler
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig


def _scheduler(env, shares, knobs=None):
    ids = env.task_ids
    half = len(ids) // 2
    return Scheduler([DomainTasks("a", ids[:half], share=shares[0]),
                      DomainTasks("b", ids[half:], share=shares[1])], seed=0, knobs=knobs)


@pytest.mark.parametrize("staleness", [0, 1])
def test_every_batch_holds_each_domains_share(make_parts, tmp_path, staleness):
    env, model, engine = make_parts(n=8, group_size=4)
    sched = _scheduler(env, (0.75, 0.25), CurriculumKnobs(group_size=4))
    rc = RolloutConfig(steps=3, groups_per_step=4, group_size=4, max_staleness=staleness,
                       filter_zero_variance=False, workers=2, groups_per_wave=2)
    events = EventLog(tmp_path / "events.jsonl")
    pipe = Pipeline(env, engine, PolicyTrainer(model, 0, OptimConfig(lr=1e-2)), sched, rc,
                    RLConfig(tis="token"), events)
    rows = []
    pipe.run(lambda step, stats: rows.append(stats))
    events.close()
    assert [(r["d/a/groups"], r["d/b/groups"]) for r in rows] == [(3.0, 1.0)] * 3
    assert all(0 <= r["d/a/reward_mean"] <= 1 and "d/b/status_ok" in r for r in rows)
    trained = [u for e in map(json.loads, open(tmp_path / "events.jsonl")) if e["event"] == "train"
               for u in e["uids"]]
    assert len(trained) == len(set(trained)) == 12
    state = pipe.state_dict()["sampler"]
    assert state["pickers"]["a"]["touched"]                   # the curriculum saw results


def test_a_group_lost_to_infra_errors_is_rerun_not_scored(make_parts, tmp_path):
    calls = []

    def flaky_infra(env):
        run = env.run

        def wrapped(jobs, engine):
            groups = run(jobs, engine)
            for job, group in zip(jobs, groups):
                calls.append(job.uid)
                if calls.count(job.uid) == 1 and job.uid % 2 == 0:  # first try of even uids
                    for e in group:
                        e.status, e.reward = "infra_error", 0.0
            return groups
        env.run = wrapped
        return env

    env, model, engine = make_parts(n=8, group_size=4)
    env = flaky_infra(env)
    rc = RolloutConfig(steps=2, groups_per_step=2, group_size=4, max_staleness=0,
                       filter_zero_variance=False)
    events = EventLog(tmp_path / "events.jsonl")
    pipe = Pipeline(env, engine, PolicyTrainer(model, 0, OptimConfig(lr=1e-2)),
                    _scheduler(env, (0.5, 0.5)), rc, RLConfig(tis="token"), events)
    rows = []
    pipe.run(lambda step, stats: rows.append(stats))
    events.close()
    log = [json.loads(line) for line in open(tmp_path / "events.jsonl")]
    retried = [e["uid"] for e in log if e["event"] == "retry"]
    assert retried and all(u % 2 == 0 for u in retried)
    assert all(r.get("status_infra_error", 0.0) == 0.0 for r in rows)  # never trained as a zero
