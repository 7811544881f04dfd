"""The fault matrix on one Ray cluster (2 CPUs, a GPU stand-in): sandbox actors, engine
replicas and trainer ranks killed with ray.kill and os._exit at random points, 10 times per
kind across runs; every run completes, and the ledger shows no group lost and none trained
twice (a second train raises). Synchronous runs also give exactly the metrics of an
undisturbed run (so every new engine replica got the current weights before it served)."""

import json
import os
import random
import threading

import pytest
from tests_ray import local_cluster, optional_ray, timing  # noqa: E402

ray = optional_ray()   # None without the extra: then deselected (tests/needs.py)

from posttrain.cluster.config import ClusterConfig  # noqa: E402
from posttrain.recipes.rl.run import run_rl  # noqa: E402
from posttrain.recipes.rl.config import load_rl_config  # noqa: E402
from posttrain.rollout.executors.ray_executor import RayExecutor  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.needs("ray")]
KILLS_PER_KIND = 10
STEPS = 150  # long enough for every kill (a replacement takes seconds to start)
CLUSTER = ClusterConfig(executor="ray", sandbox_actors=2, sandbox_cpus=0.5, engine_replicas=2, engine_cpus=0.5,
                        engine_resources={"fake_gpu": 1}, heartbeat_s=0.5, start_timeout_s=60)


ray_cluster = local_cluster(resources={"fake_gpu": 2})


def kill(handle, how: str) -> None:
    if how == "ray.kill":
        ray.kill(handle, no_restart=True)
    else:  # the process exits on its own, mid-whatever it was doing
        handle.__ray_call__.remote(lambda self: os._exit(1))


class Killer(threading.Thread):
    """Kills a random live actor whose name contains `kind` every U(lo, hi) s, n times."""

    def __init__(self, kind: str, n: int, seed: int, lo=0.3, hi=1.5, ready=lambda: True):
        super().__init__(daemon=True)
        self.kind, self.n, self.rng, self.lo, self.hi, self.ready = kind, n, random.Random(seed), lo, hi, ready
        self.done, self.stop = [], threading.Event()

    def run(self) -> None:
        while len(self.done) < self.n and not self.stop.wait(self.rng.uniform(self.lo, self.hi)):
            killed = {name for name, _ in self.done}
            names = sorted(a for a in ray.util.list_named_actors() if self.kind in a and a not in killed)
            if not names or not self.ready():
                continue
            name = self.rng.choice(names)
            try:
                handle = ray.get_actor(name)
            except ValueError:
                continue
            how = self.rng.choice(["ray.kill", "os._exit"])
            kill(handle, how)
            self.done.append((name, how))


def run_pipeline(make_parts, killers=(), **cfg):
    from posttrain.rollout.config import RolloutConfig
    from posttrain.rollout.pipeline import Pipeline
    from posttrain.schedule.sampler import TaskSampler
    from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig

    env, model, engine = make_parts()
    with RayExecutor(CLUSTER) as ex:
        env, engine = ex.wrap(env, engine)
        trainer = PolicyTrainer(model, 0, OptimConfig(lr=1e-2))
        rc = RolloutConfig(groups_per_step=2, group_size=env.group_size, **cfg)
        pipe = Pipeline(env, engine, trainer, TaskSampler(env.task_ids, 0), rc, RLConfig(tis="token"))
        rows = []
        for k in killers:
            k.start()
        try:
            pipe.run(lambda i, stats: rows.append({k: v for k, v in stats.items() if not timing(k)}))
        finally:
            for k in killers:
                k.stop.set()
                k.join()
        restarts = ex.restarts()
    return pipe, rows, restarts


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_sandbox_actors_and_engine_replicas_killed_at_random_points(make_parts, mode):
    kw = dict(steps=STEPS, max_staleness=0) if mode == "sync" else dict(
        steps=STEPS, max_staleness=1, workers=2, groups_per_wave=1)
    killers = [Killer(kind, KILLS_PER_KIND // 2, seed=len(mode) + 7 * i, lo=0.05, hi=0.8)
               for i, kind in enumerate(["-sandbox-", "-engine-"])]
    pipe, rows, restarts = run_pipeline(make_parts, killers, **kw)
    for k, kind in zip(killers, ["sandbox", "engine"]):
        assert len(k.done) == KILLS_PER_KIND // 2, f"the run ended before every {kind} kill"
        assert restarts[kind] >= len(k.done)
    assert len(rows) == STEPS
    audit = pipe.audit()
    assert audit["lost"] == [] and audit["trained"] == sum(r["groups"] for r in rows)
    if mode == "sync":
        _, undisturbed, _ = run_pipeline(make_parts, **kw)
        assert rows == undisturbed


SETTINGS = ["threads=1", 'tasks.kind="copy"', "tasks.n_train=6", "tasks.n_eval=0", "tasks.max_tokens=4",
            "policy.sft_steps=0", "policy.vocab_size=300", "rollout.max_staleness=0",
            "rollout.groups_per_step=2", "rollout.group_size=3", "rollout.checkpoint_every=1",
            'cluster.executor="ray"', "cluster.trainer_ranks=2", "cluster.rank_failures=20",
            "cluster.start_timeout_s=60", "cluster.sandbox_actors=1", "cluster.engine_replicas=1"]


def metrics(run_dir):
    return [{k: v for k, v in json.loads(line).items() if not timing(k)}
            for line in (run_dir / "metrics.jsonl").open()]


def test_trainer_ranks_killed_at_random_points_resume_from_the_last_checkpoint(tmp_path):
    base = [f'runs_dir="{tmp_path}"', *SETTINGS, "rollout.steps=12"]
    run_rl(load_rl_config(None, base + ['name="whole"']))
    kills = []
    for run in range(2):
        name = f"killed{run}"
        killer = Killer("trainer", KILLS_PER_KIND // 2, seed=run, lo=1.0, hi=4.0,
                        ready=lambda: (tmp_path / name / "checkpoints" / "latest").is_file())
        killer.start()
        try:
            summary = run_rl(load_rl_config(None, base + [f'name="{name}"', "rollout.steps=40"]))
        finally:
            killer.stop.set()
            killer.join()
        kills += killer.done
        assert summary["audit"]["lost"] == [] and summary["steps"] == 40
        log = [json.loads(line) for line in (tmp_path / name / "events.jsonl").open()]
        trained = [u for e in log if e["event"] == "train" for u in e["uids"]]
        assert len(trained) == len(set(trained)) == summary["audit"]["trained"]
        assert metrics(tmp_path / name)[:12] == metrics(tmp_path / "whole")
    assert len(kills) == KILLS_PER_KIND
