"""Cleanup for the docker backend: containers of sandboxes whose owner died, and the
image cache. Policy: containers are removed by close() and, if their owner crashed, by
the reaper (`reclaim` below, through sandbox/reaper.py); task images stay cached (keyed
by build-context hash) until `prune` removes those unused for `older_than_days` (or all
of them)."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from posttrain.procs import pid_alive
from posttrain.sandbox.base import ReapReport
from posttrain.sandbox.docker import cli as engine


def reclaim(record: dict, report: ReapReport) -> None:
    """A dead owner's container and compose project (sidecars, network, volumes), removed
    with the engine its record names; nothing when that CLI is gone."""
    container, project = record.get("container"), record.get("compose_project")
    name = record.get("engine", "docker")            # records before engines were named: docker
    cli = shutil.which(name) if (container or project) and name in engine.ENGINES else None
    if cli and container:
        subprocess.run([cli, "rm", "-f", container], capture_output=True, timeout=120)
    if cli and project:
        from posttrain.sandbox.docker.compose import remove_project

        remove_project(cli, project)


def sweep(state: Path, live: Callable[[str], bool], report: ReapReport) -> None:
    """Nothing: every container has a record; those whose record is lost `prune` finds."""


def prune(older_than_days: float = 7.0, all_images: bool = False,
          backend: str = "docker") -> dict:
    """Remove posttrain containers whose owner process is gone and cached task images
    older than the cutoff (all of them with all_images), on the backend's engine;
    returns what was removed."""
    cli = engine.chosen(backend).path
    removed = {"containers": [], "networks": [], "volumes": [], "images": []}
    out = engine.run(cli, "ps", "-a", "--filter", f"label={engine.LABEL}", "--format",
                     '{{.ID}} {{.Label "' + engine.LABEL + '"}}').stdout.decode()
    for line in out.splitlines():
        cid, _, owner = line.partition(" ")
        if not owner.isdigit() or not pid_alive(int(owner)):
            engine.run(cli, "rm", "-f", cid, check=False)
            removed["containers"].append(cid)
    for kind in ("network", "volume"):     # a multi-container task's, by their owner label
        out = engine.run(cli, kind, "ls", "--filter", f"label={engine.LABEL}", "--format",
                         '{{.Name}} {{.Label "' + engine.LABEL + '"}}').stdout.decode()
        for line in out.splitlines():
            name, _, owner = line.partition(" ")
            if not owner.isdigit() or not pid_alive(int(owner)):
                engine.run(cli, kind, "rm", name, check=False)
                removed[f"{kind}s"].append(name)
    cutoff = time.time() - older_than_days * 86400
    out = engine.run(cli, "images", "--filter", f"label={engine.IMAGE_LABEL}", "--format",
                     "{{.ID}} {{.Repository}}:{{.Tag}}").stdout.decode()
    for line in out.splitlines():          # by id: an untagged (dangling) image has no name
        image_id, _, name = line.partition(" ")
        created = engine.inspect(cli, image_id, "{{.Created}}")
        if all_images or _timestamp(created) < cutoff:
            target = image_id if name == "<none>:<none>" else name
            if engine.run(cli, "rmi", target, check=False).returncode == 0:
                removed["images"].append(name)
    return removed



def _timestamp(created: str) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(created[:26].rstrip("Z")).timestamp()
    except ValueError:
        return 0.0
