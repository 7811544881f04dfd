"""The bodies of the rollout actors: engine replicas and sandbox actors.

An `EngineReplica` holds one copy of the policy in an embedded engine: it generates and takes
versioned weight updates between generate calls (several actor threads: a publish lands while
a wave runs, as in one process). A `SandboxActor` holds the env (tasks, sandboxes, the reward)
and runs waves: the agent loop and the verifiers run there, and every generate call goes to
the engine replica the driver named for the wave, through a `ReplicaClient`. A replica that
dies mid-wave makes the wave fail with `EngineLost`, whatever the env did with the error, so
the driver replaces the replica and runs the wave again. Each actor logs to
RUN/actors/<name>.log.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from posttrain.engine.base import Engine, SamplingParams
from posttrain.types import Completion


class EngineLost(RuntimeError):
    """The engine replica serving a wave died during it."""


def actor_log(name: str, path: str | None) -> logging.Logger:
    log = logging.getLogger(f"posttrain.actor.{name}")
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    return log


def where() -> dict:
    import ray

    ctx = ray.get_runtime_context()
    return {"node": ctx.get_node_id(), "ip": ray.util.get_node_ip_address(), "pid": os.getpid()}


class EngineReplica:
    """Actor body: one embedded engine with the policy's weights. Built with ray.remote(...)."""

    def __init__(self, name: str, model, tokenizer, weights, version: int, log_path: str | None):
        import torch

        from posttrain.engine.paged.local import LocalEngine
        from posttrain.rollout.weights import LockedEngine

        torch.set_num_threads(1)
        self.name, self.log = name, actor_log(name, log_path)
        self.engine = LockedEngine(LocalEngine(model, tokenizer))
        self.engine.publish_state(weights, version)  # before it serves anything
        self.log.info("%s up on pid %d with weights v%d", name, os.getpid(), version)

    def where(self) -> dict:
        return where()

    def ping(self) -> int:
        return self.engine.policy_version

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        return self.engine.generate(prompts, params)

    def update_weights(self, weights, version: int) -> None:
        self.engine.publish_state(weights, version)
        self.log.info("weights v%d", version)


class ReplicaClient(Engine):
    """The engine a sandbox actor's env sees: each generate call is a call on the replica."""

    def __init__(self, replica):
        self.replica = replica
        self.lost: BaseException | None = None
        self.generate_s = 0.0

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        import ray
        from ray.exceptions import RayActorError

        if self.lost is not None:
            raise EngineLost(f"the engine replica died: {self.lost}")
        t0 = time.perf_counter()
        try:
            out = ray.get(self.replica.generate.remote(prompts, params))
        except RayActorError as e:
            self.lost = e
            raise EngineLost(f"the engine replica died: {type(e).__name__}") from e
        finally:
            self.generate_s += time.perf_counter() - t0
        if out:
            self.policy_version = out[-1].policy_version
        return out


class SandboxActor:
    """Actor body: the env, its tasks and sandboxes. Built with ray.remote(...) by the pool."""

    def __init__(self, name: str, env, log_path: str | None):
        import torch

        torch.set_num_threads(1)
        self.name, self.env, self.log = name, env, actor_log(name, log_path)
        self.log.info("%s up on pid %d", name, os.getpid())

    def where(self) -> dict:
        return where()

    def ping(self) -> bool:
        return True

    def run(self, jobs, replica, replica_name: str) -> tuple[list, dict]:
        t0, client = time.perf_counter(), ReplicaClient(replica)
        try:
            out = self.env.run(jobs, client)
        except Exception:
            if client.lost is None:
                raise
        if client.lost is not None:
            self.log.info("wave %s: %s died", [j.uid for j in jobs], replica_name)
            raise EngineLost(f"{replica_name} died during the wave")
        wall = time.perf_counter() - t0
        self.log.info("wave %s on %s: %.3f s", [j.uid for j in jobs], replica_name, wall)
        return out, {"wave_s": wall, "generate_s": client.generate_s}
