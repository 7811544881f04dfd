"""Joining or starting Ray, and refusing early what a cluster can never grant.

`connect` starts a local Ray sized to this machine (or to `cluster.num_cpus`, with custom
resources such as a GPU stand-in) or joins `cluster.address`, after checking that the
address answers at all (Ray itself would retry for a long time). `placement` reserves one
bundle per actor and fails with a clear error, not a hang, when the cluster lacks the
resources in total or does not grant them within `start_timeout_s`.
"""

from __future__ import annotations

import os
import socket
from collections import Counter

from posttrain.cluster.config import ClusterConfig
from posttrain.errors import PosttrainError


def _reachable(address: str, timeout_s: float = 3.0) -> None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise PosttrainError(f"cluster.address {address!r}: expected host:port (or \"auto\")")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise PosttrainError(f"cluster.address {address}: cannot reach a Ray cluster there ({e})") from e


def connect(cfg: ClusterConfig) -> bool:
    """Make sure this process is connected to Ray; True if this call started the connection."""
    import ray

    if ray.is_initialized():
        return False
    if cfg.address:
        if cfg.address != "auto":
            _reachable(cfg.address)
        ray.init(address=cfg.address, log_to_driver=False)
        return True
    ray.init(num_cpus=cfg.num_cpus or os.cpu_count(), resources=dict(cfg.resources),
             object_store_memory=cfg.object_store_mb * 2**20, include_dashboard=False,
             log_to_driver=False)
    return True


def check_total(bundles: list[dict[str, float]], what: str) -> None:
    """A clear error when the cluster, even idle, has less of a resource than the bundles ask."""
    import ray

    need: Counter = Counter()
    for b in bundles:
        need.update(b)
    have = ray.cluster_resources()
    short = [f"{k} {v:g} (the cluster has {have.get(k, 0):g})" for k, v in sorted(need.items())
             if have.get(k, 0) + 1e-9 < v]
    if short:
        raise PosttrainError(f"{what} ask for {', '.join(short)}: these resources can never be satisfied")


def placement(bundles: list[dict[str, float]], what: str, timeout_s: float, strategy: str = "PACK"):
    """A ready placement group with one bundle per actor."""
    from ray.util.placement_group import placement_group, remove_placement_group

    check_total(bundles, what)
    pg = placement_group(bundles, strategy=strategy)
    if not pg.wait(timeout_seconds=timeout_s):
        remove_placement_group(pg)
        raise PosttrainError(f"{what}: the cluster did not grant {bundles[0]} x {len(bundles)} "
                             f"({strategy}) within {timeout_s:g} s; other jobs hold the resources")
    return pg


def bundle(cpus: float, extra: dict[str, float]) -> dict[str, float]:
    return {"CPU": cpus, **{k: float(v) for k, v in extra.items()}}
