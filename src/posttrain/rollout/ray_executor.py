"""The Ray executor: the pipeline's waves run on rollout-worker actors.

The buffer, the policy versions and the trainer stay with the driver (the pipeline, unchanged).
`RayExecutor.wrap(env, engine)` starts `cluster.rollout_actors` workers in one placement group
(each bundle: `actor_cpus` CPUs plus `actor_resources`, e.g. a GPU for its engine) and returns
`RemoteEnv` (a wave runs on an idle worker; a dead worker is replaced and the wave is
`WaveLost`, so the pipeline runs it again) and `RemoteEngine` (the driver's own engine, used
for evals, plus a publish that reaches every worker's replica).
"""

from __future__ import annotations

import uuid
from pathlib import Path

from posttrain.engine.base import Engine, SamplingParams
from posttrain.rollout.config import ClusterConfig
from posttrain.rollout.executor import WaveLost
from posttrain.rollout.ray_cluster import bundle, connect, placement
from posttrain.rollout.ray_workers import RolloutWorker, WorkerPool
from posttrain.types import Completion


def _state(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


class RemoteEngine(Engine):
    """The driver's engine (evals generate here) whose publish also reaches the workers."""

    cores = None

    def __init__(self, local, pool: WorkerPool):
        self.local, self.pool = local, pool

    @property
    def policy_version(self) -> int:
        return self.local.policy_version

    @property
    def generate_s(self) -> float:
        return self.pool.generate_s

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        return self.local.generate(prompts, params)

    def publish(self, model, version: int) -> None:
        import ray

        self.local.publish(model, version)
        self.pool.publish(ray.put(_state(model)), version)


class RemoteEnv:
    """The env's waves, each on an idle rollout worker."""

    def __init__(self, env, pool: WorkerPool):
        self.env, self.pool = env, pool
        self.group_size = env.group_size

    @property
    def task_ids(self) -> list[str]:
        return self.env.task_ids

    def run(self, jobs, engine) -> list:
        import ray
        from ray.exceptions import RayActorError

        slot = self.pool.acquire()
        timing = None
        try:
            episodes, timing = ray.get(slot.actor.run.remote(jobs))
            return episodes
        except RayActorError as e:
            self.pool.replace(slot, e)
            raise WaveLost(f"{slot.name} died during a wave ({type(e).__name__})") from e
        finally:
            self.pool.release(slot, timing)


class RayExecutor:
    def __init__(self, cfg: ClusterConfig, log_dir: Path | None = None):
        self.cfg, self.log_dir = cfg, log_dir
        self.pool: WorkerPool | None = None
        self._pg = None
        self._started = connect(cfg)
        self.run_id = uuid.uuid4().hex[:8]  # actor names: posttrain-<run>-rollout-<i>-<restarts>

    def wrap(self, env, engine) -> tuple:
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        c = self.cfg
        b = bundle(c.actor_cpus, c.actor_resources)
        self._pg = placement([b] * c.rollout_actors, f"cluster.rollout_actors={c.rollout_actors} workers",
                             c.start_timeout_s)
        model, tok = engine.engine.model, engine.engine.tokenizer
        actor_cls = ray.remote(RolloutWorker)
        log_dir = self.log_dir

        def spawn(slot, weights, version):
            log = str(log_dir / f"{slot.name}.log") if log_dir else None
            opts = dict(name=f"posttrain-{self.run_id}-{slot.name}-{slot.restarts}", num_cpus=b["CPU"],
                        resources={k: v for k, v in b.items() if k != "CPU"},
                        max_concurrency=2, max_restarts=0,
                        scheduling_strategy=PlacementGroupSchedulingStrategy(self._pg, slot.index))
            return actor_cls.options(**opts).remote(slot.name, env, model, tok, weights, version, log)

        self.pool = WorkerPool(spawn, c.rollout_actors, "rollout", log_dir, c.max_restarts,
                               c.heartbeat_s, c.start_timeout_s)
        self.pool.start(ray.put(_state(model)), engine.policy_version)
        return RemoteEnv(env, self.pool), RemoteEngine(engine, self.pool)

    def metrics(self) -> dict:
        return self.pool.metrics() if self.pool else {}

    def close(self) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        if self.pool is not None:
            self.pool.close()
            self.pool = None
        if self._pg is not None:
            try:
                remove_placement_group(self._pg)
            except Exception:
                pass
            self._pg = None
        if self._started:
            ray.shutdown()
            self._started = False

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
