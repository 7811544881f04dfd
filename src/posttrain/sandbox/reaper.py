"""Reclaim sandboxes whose owner process is gone: kill what they left running, free their
cgroups, tmpfs and files. Safe to run at any time; the pool runs it when it starts, so
a crash of the parent (even SIGKILL) is cleaned up by the next run.

The reaper knows sandbox directories and owner records; what a backend left behind
(processes, containers, cgroups) its own `reclaim` and `sweep` free (base.Reclaimer).
"""

from __future__ import annotations

import shutil
import time
from functools import partial
from pathlib import Path

from posttrain.sandbox import hostdir, process
from posttrain.sandbox.base import Reclaimer, ReapReport
from posttrain.sandbox.bwrap import reclaim as bwrap
from posttrain.sandbox.docker import cleanup as docker

__all__ = ["ReapReport", "reap"]

BACKENDS: tuple[Reclaimer, ...] = (bwrap, docker, process)
ETC_KEEP_S = 3 * 3600.0


def reap(state: Path | None = None) -> ReapReport:
    """Reclaim every sandbox under the state dir whose owner is dead, then what each
    backend left that no record names."""
    state = state or hostdir.state_dir()
    report = ReapReport()
    for root in sorted(state.iterdir()):
        if root.name.startswith((".", "etc-")):
            _drop_if_old(root)
            continue
        try:
            if not _is_live(root):
                _reclaim(root, hostdir.read_owner(root) or {}, report)
        except FileNotFoundError:       # its owner closed it while we looked
            continue
    for backend in BACKENDS:
        backend.sweep(state, partial(_sandbox_live, state), report)
    return report


def _drop_if_old(path: Path) -> None:
    """Old shared /etc copies and build leftovers (no sandbox binds one for this long)."""
    try:
        if time.time() - path.stat().st_mtime > ETC_KEEP_S:
            shutil.rmtree(path, ignore_errors=True)
    except FileNotFoundError:
        pass


def _is_live(root: Path) -> bool:
    if not root.is_dir():
        return True                     # not a sandbox dir: leave it alone
    record = hostdir.read_owner(root)
    if record is not None:
        return hostdir.owner_alive(record)
    return time.time() - root.stat().st_mtime < hostdir.GRACE_S


def _reclaim(root: Path, record: dict, report: ReapReport) -> None:
    for backend in BACKENDS:
        backend.reclaim(record, report)
    hostdir.remove_root(root, bool(record.get("tmpfs")))
    if root.exists():
        shutil.rmtree(root, ignore_errors=True)
    report.sandboxes.append(root.name)


def _sandbox_live(state: Path, name: str) -> bool:
    """Asked after a backend saw a leftover (a bwrap, a cgroup): a live sandbox's dir exists
    before its cgroups, and its owner record before its first bwrap, so neither is a new one's."""
    root = state / name
    try:
        return root.is_dir() and _is_live(root)
    except FileNotFoundError:           # closed while we looked
        return False
