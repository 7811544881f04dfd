"""The unchanged pipeline on the Ray executor: sandbox actors and engine replicas are actors
(one Ray per module, 2 CPUs and a GPU stand-in), sync runs equal the local executor's, a sandbox
actor or engine replica killed mid-run is replaced (a replica with the current weights) and its
wave runs again, and resources that can never be granted fail at start."""

import json

import pytest
from tests_ray import local_cluster, optional_ray, timing  # noqa: E402

ray = optional_ray()   # None without the extra: then deselected (tests/needs.py)

from posttrain.cluster.config import ClusterConfig  # noqa: E402
from posttrain.errors import PosttrainError  # noqa: E402
from posttrain.rollout.config import RolloutConfig  # noqa: E402
from posttrain.rollout.events import EventLog  # noqa: E402
from posttrain.rollout.executors.ray_executor import RayExecutor  # noqa: E402
from posttrain.rollout.pipeline import Pipeline  # noqa: E402
from posttrain.schedule.sampler import TaskSampler  # noqa: E402
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig  # noqa: E402

# a Ray start and actor starts: about a minute on 2 busy cores
pytestmark = [pytest.mark.slow, pytest.mark.needs("ray")]
CLUSTER = ClusterConfig(executor="ray", sandbox_actors=2, sandbox_cpus=0.5, engine_replicas=2, engine_cpus=0.5,
                        engine_resources={"fake_gpu": 1}, start_timeout_s=30, heartbeat_s=0.5)


ray_cluster = local_cluster(resources={"fake_gpu": 2})


def run(make_parts, executor=None, steps=3, tmp_path=None, on_step=None, **cfg):
    env, model, engine = make_parts()
    if executor is not None:
        env, engine = executor.wrap(env, engine)
    trainer = PolicyTrainer(model, 0, OptimConfig(lr=1e-2))
    rc = RolloutConfig(steps=steps, groups_per_step=2, group_size=env.group_size, **cfg)
    events = EventLog(tmp_path / "events.jsonl" if tmp_path else None)
    pipe = Pipeline(env, engine, trainer, TaskSampler(env.task_ids, 0), rc, RLConfig(tis="token"), events)
    rows = []

    def step(i, stats):
        rows.append({k: v for k, v in stats.items() if not timing(k)})
        if on_step:
            on_step(i, pipe)
    pipe.run(step)
    events.close()
    return pipe, rows


def test_sync_run_on_ray_equals_the_local_run_and_the_ledger_balances(make_parts, tmp_path):
    _, local = run(make_parts, max_staleness=0)
    with RayExecutor(CLUSTER, tmp_path / "actors") as ex:
        pipe, remote = run(make_parts, ex, max_staleness=0)
        per_actor = ex.metrics()
    assert remote == local
    audit = pipe.audit()
    assert audit["lost"] == [] and audit["trained"] == 6
    assert set(per_actor) >= {"actor_sandbox-0_wave_s", "actor_sandbox-1_restarts_total",
                              "actor_engine-1_restarts_total"}
    assert "weights v3" in (tmp_path / "actors" / "engine-0.log").read_text()
    assert "on engine-0" in (tmp_path / "actors" / "sandbox-0.log").read_text()  # sandbox i -> replica i


def test_async_on_ray_trains_each_group_once(make_parts, tmp_path):
    with RayExecutor(CLUSTER) as ex:
        pipe, rows = run(make_parts, ex, steps=4, tmp_path=tmp_path, max_staleness=1, workers=2,
                         groups_per_wave=1)
    assert len(rows) == 4 and all(r["staleness_max"] <= 1 for r in rows)
    trained = [u for line in (tmp_path / "events.jsonl").open() if (e := json.loads(line))["event"] == "train"
               for u in e["uids"]]
    assert len(trained) == len(set(trained)) == pipe.audit()["trained"]


@pytest.mark.parametrize("kind", ["sandbox", "engine"])
def test_an_actor_killed_mid_run_is_replaced_and_its_wave_runs_again(make_parts, tmp_path, kind):
    def kill(step, pipe):
        if step in (0, 1):  # between steps: the next wave finds it dead (or the heartbeat does first)
            pool = ex.sandboxes if kind == "sandbox" else ex.replicas
            ray.kill(pool.slots[0].actor, no_restart=True)
    _, local = run(make_parts, max_staleness=0)
    one = CLUSTER.model_copy(update={"sandbox_actors": 1, "engine_replicas": 1})
    with RayExecutor(one, tmp_path) as ex:
        pipe, rows = run(make_parts, ex, tmp_path=tmp_path, on_step=kill, max_staleness=0)
        restarts = ex.restarts()
    assert rows == local  # a new replica got the current weights before it served
    assert restarts == {"sandbox": 2 * (kind == "sandbox"), "engine": 2 * (kind == "engine")}
    assert pipe.audit()["lost"] == []


@pytest.mark.parametrize("field", ["engine_resources", "sandbox_resources"])
def test_resources_that_can_never_be_granted_fail_at_start(make_parts, field):
    env, _, engine = make_parts()
    bad = CLUSTER.model_copy(update={field: {"fake_gpu": 4}})
    with RayExecutor(bad) as ex, pytest.raises(PosttrainError, match="can never be satisfied"):
        ex.wrap(env, engine)


def test_resources_held_by_other_jobs_fail_after_the_start_timeout_not_hang(make_parts):
    from ray.util.placement_group import placement_group, remove_placement_group

    env, _, engine = make_parts()
    held = placement_group([{"fake_gpu": 2}])  # another job holds every GPU stand-in
    assert held.wait(timeout_seconds=30)
    try:
        slow = CLUSTER.model_copy(update={"start_timeout_s": 2})
        with RayExecutor(slow) as ex, pytest.raises(PosttrainError, match="did not grant .* within 2 s"):
            ex.wrap(env, engine)
    finally:
        remove_placement_group(held)


def test_trainer_ranks_that_cannot_start_are_refused_before_any_rank_runs(make_parts):
    from posttrain.train.ranks import RankedTrainer

    _, model, _ = make_parts()
    with pytest.raises(PosttrainError, match="can never be satisfied"):
        RankedTrainer(model, 0, OptimConfig(fused=False), 2, 0.5, {"fake_gpu": 8})
    with pytest.raises(PosttrainError, match="3 trainer ranks do not divide the model's shards"):
        RankedTrainer(model, 0, OptimConfig(fused=False), 3, 0.5)
