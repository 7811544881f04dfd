"""The Ray executor: the pipeline's waves run on sandbox actors, its tokens on engine replicas.

The buffer, the policy versions and the trainer stay with the driver (the pipeline, unchanged).
`RayExecutor.wrap(env, engine)` starts `cluster.engine_replicas` engine actors in one placement
group (each bundle: `engine_cpus` plus `engine_resources`, e.g. a GPU) and
`cluster.sandbox_actors` sandbox actors (each asks `sandbox_cpus` plus `sandbox_resources`).
It returns `RemoteEnv`, where a wave runs on an idle sandbox actor whose generate calls go to
one replica (sandbox actor i uses replica i mod R, so a group's and an episode's requests stay
on one replica), and `DriverEngine`: the driver's own engine (evals generate there) whose
publish also reaches every replica. A dead sandbox actor or replica is replaced (a replica with
the current weights, before it serves) and the wave raises `WaveLost`, so the pipeline runs it
again with the same groups and seed.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from posttrain.cluster.actor_pool import ActorPool
from posttrain.cluster.config import ClusterConfig
from posttrain.cluster.ray_cluster import bundle, check_total, connect, placement
from posttrain.engine.base import Engine, SamplingParams
from posttrain.rollout.envs import Environment
from posttrain.rollout.executors.base import WaveLost
from posttrain.rollout.executors.ray_actors import EngineLost, EngineReplica, SandboxActor
from posttrain.types import Completion


def _state(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


class DriverEngine(Engine):
    """The driver's engine (evals generate here) whose publish also reaches the replicas."""

    cores = None

    def __init__(self, local, replicas: ActorPool, sandboxes: ActorPool):
        self.local, self.replicas, self.sandboxes = local, replicas, sandboxes

    @property
    def policy_version(self) -> int:
        return self.local.policy_version

    @property
    def generate_s(self) -> float:
        return self.sandboxes.generate_s

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        return self.local.generate(prompts, params)

    def publish(self, model, version: int) -> None:
        import ray

        self.local.publish(model, version)
        self.replicas.publish(ray.put(_state(model)), version)


class RemoteEnv(Environment):
    """The env's waves, each on an idle sandbox actor, its tokens from one engine replica."""

    def __init__(self, env: Environment, sandboxes: ActorPool, replicas: ActorPool):
        self.env, self.sandboxes, self.replicas = env, sandboxes, replicas
        self.judged, self.held_out = env.judged, env.held_out
        self.group_size = env.group_size

    @property
    def task_ids(self) -> list[str]:
        return self.env.task_ids

    def run(self, jobs, engine) -> list:
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        slot = self.sandboxes.acquire()
        replica, actor, seen = self.replicas.route(slot.index)
        timing = None
        try:
            episodes, timing = ray.get(slot.actor.run.remote(jobs, actor, replica.name))
            return episodes
        except RayActorError as e:  # the sandbox actor itself died
            self.sandboxes.replace(slot, e)
            raise WaveLost(f"{slot.name} died during a wave ({type(e).__name__})") from e
        except RayTaskError as e:
            if not isinstance(e, EngineLost) and not isinstance(e.cause, EngineLost):
                raise
            self.replicas.replace(replica, e, seen)
            raise WaveLost(f"{replica.name} died during a wave on {slot.name}") from e
        finally:
            self.sandboxes.release(slot, timing)


class RayExecutor:
    def __init__(self, cfg: ClusterConfig, log_dir: Path | None = None):
        self.cfg, self.log_dir = cfg, log_dir
        self.sandboxes: ActorPool | None = None
        self.replicas: ActorPool | None = None
        self._pg = None
        self._started = connect(cfg)
        self.run_id = uuid.uuid4().hex[:8]  # actor names: posttrain-<run>-<kind>-<i>-<restarts>

    def _options(self, slot, b: dict, **extra) -> dict:
        return dict(name=f"posttrain-{self.run_id}-{slot.name}-{slot.restarts}", num_cpus=b["CPU"],
                    resources={k: v for k, v in b.items() if k != "CPU"}, max_restarts=0, **extra)

    def _log(self, slot) -> str | None:
        return str(self.log_dir / f"{slot.name}.log") if self.log_dir else None

    def _start_replicas(self, model, tok, version: int) -> ActorPool:
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        c, b = self.cfg, bundle(self.cfg.engine_cpus, self.cfg.engine_resources)
        self._pg = placement([b] * c.engine_replicas, f"cluster.engine_replicas={c.engine_replicas} replicas",
                             c.start_timeout_s)
        actor_cls = ray.remote(EngineReplica)

        def spawn(slot, weights, v):
            strategy = PlacementGroupSchedulingStrategy(self._pg, slot.index)
            opts = self._options(slot, b, max_concurrency=4, scheduling_strategy=strategy)
            return actor_cls.options(**opts).remote(slot.name, model, tok, weights, v, self._log(slot))

        pool = ActorPool(spawn, c.engine_replicas, "engine", self.log_dir, c.max_restarts,
                         c.heartbeat_s, c.start_timeout_s)
        pool.launch(ray.put(_state(model)), version)
        return pool

    def _start_sandboxes(self, env) -> ActorPool:
        import ray

        c, b = self.cfg, bundle(self.cfg.sandbox_cpus, self.cfg.sandbox_resources)
        actor_cls = ray.remote(SandboxActor)

        def spawn(slot):
            opts = self._options(slot, b, max_concurrency=2)
            return actor_cls.options(**opts).remote(slot.name, env, self._log(slot))

        pool = ActorPool(spawn, c.sandbox_actors, "sandbox", self.log_dir, c.max_restarts,
                         c.heartbeat_s, c.start_timeout_s)
        pool.launch()
        return pool

    def wrap(self, env, engine) -> tuple:
        c = self.cfg
        check_total([bundle(c.engine_cpus, c.engine_resources)] * c.engine_replicas
                    + [bundle(c.sandbox_cpus, c.sandbox_resources)] * c.sandbox_actors,
                    f"cluster.engine_replicas={c.engine_replicas} and cluster.sandbox_actors={c.sandbox_actors}")
        self.replicas = self._start_replicas(engine.engine.model, engine.engine.tokenizer, engine.policy_version)
        self.sandboxes = self._start_sandboxes(env)
        self.replicas.ready()  # both kinds start side by side
        self.sandboxes.ready()
        return RemoteEnv(env, self.sandboxes, self.replicas), DriverEngine(engine, self.replicas, self.sandboxes)

    def metrics(self) -> dict:
        """Sandbox actors' wave seconds and waves; restarts of both kinds."""
        if self.sandboxes is None or self.replicas is None:
            return {}
        replicas = {k: v for k, v in self.replicas.metrics().items() if k.endswith("_restarts_total")}
        return self.sandboxes.metrics() | replicas

    def restarts(self) -> dict[str, int]:
        """Replacements so far, per actor kind."""
        return {kind: sum(s.restarts for s in pool.slots) if pool else 0
                for kind, pool in (("sandbox", self.sandboxes), ("engine", self.replicas))}

    def close(self) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        for pool in (self.sandboxes, self.replicas):
            if pool is not None:
                pool.close()
        self.sandboxes = self.replicas = None
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
