"""ClusterConfig: the Ray cluster, the actors the rollout loop runs on and the trainer ranks. Checked when built."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from posttrain.config_base import StrictModel


class ClusterConfig(StrictModel):
    """Where the rollout loop's waves run (rollout/executors/base.py, docs/scale.md)."""

    executor: Literal["local", "ray"] = "local"
    address: str | None = None                   # join this Ray cluster ("host:port", "auto"); None: start one
    num_cpus: int | None = Field(None, ge=1)     # a started Ray's CPUs; None: this machine's
    resources: dict[str, float] = {}             # a started Ray's custom resources (e.g. a GPU stand-in)
    object_store_mb: int = Field(128, ge=80)     # a started Ray's object store
    sandbox_actors: int = Field(2, ge=1)         # actors that run waves: agent loops, sandboxes, verifiers
    sandbox_cpus: float = Field(0.5, gt=0)       # CPUs each sandbox actor asks for
    sandbox_resources: dict[str, float] = {}     # more per sandbox actor, e.g. {"sandbox": 1} (a node mark)
    engine_replicas: int = Field(1, ge=1)        # engine actors, each one copy of the policy (a placement group)
    engine_cpus: float = Field(0.5, gt=0)        # CPUs each engine replica asks for
    engine_resources: dict[str, float] = {}      # more per replica, e.g. {"GPU": 1}
    max_restarts: int = Field(20, ge=0)          # replacements per actor slot before the run fails
    heartbeat_s: float = Field(1.0, gt=0)        # how often idle actors are pinged
    start_timeout_s: float = Field(60.0, gt=0)   # resources or actors not ready by then: a clear error
    trainer_ranks: int = Field(1, ge=1)          # > 1: FSDP2 ranks as Ray actors (train/ranks.py)
    trainer_cpus: float = Field(0.5, gt=0)       # CPUs each trainer rank asks for
    trainer_resources: dict[str, float] = {}     # more per rank, e.g. {"GPU": 1}
    rank_failures: int = Field(3, ge=0)          # runs resumed after a trainer rank died
