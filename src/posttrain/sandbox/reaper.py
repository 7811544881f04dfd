"""Reclaim sandboxes whose owner process is gone: kill what they left running, free their
cgroups, tmpfs and files. Safe to run at any time; the pool runs it when it starts, so
a crash of the parent (even SIGKILL) is cleaned up by the next run.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from posttrain.sandbox import hostdir
from posttrain.sandbox.cgroups import ROOT as CGROUP_ROOT
from posttrain.sandbox.cgroups import Cgroup, _own_paths

GRACE_S = 60.0    # a directory without an owner record younger than this may be mid-creation
ETC_KEEP_S = 3 * 3600.0


@dataclass
class ReapReport:
    """What one pass reclaimed."""

    sandboxes: list[str] = field(default_factory=list)
    processes_killed: int = 0
    cgroups_removed: int = 0


def reap(state: Path | None = None) -> ReapReport:
    """Reclaim every sandbox under the state dir whose owner is dead, then stray cgroups."""
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
    report.processes_killed += _kill_stranded(state)
    _reap_cgroups(state, report)
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
    return time.time() - root.stat().st_mtime < GRACE_S


def _reclaim(root: Path, record: dict, report: ReapReport) -> None:
    pid, start = record.get("runner_pid"), record.get("runner_start")
    if isinstance(pid, int) and start and hostdir.process_start(pid) == start:
        try:
            os.killpg(pid, signal.SIGKILL)
            report.processes_killed += 1
        except (ProcessLookupError, PermissionError):
            pass
    if record.get("container"):          # a docker sandbox: its container goes too
        from posttrain.sandbox.docker.cleanup import remove_container

        remove_container(record["container"])
    if record.get("compose_project"):    # a multi-container task: its sidecars, network, volumes
        from posttrain.sandbox.docker.cleanup import remove_compose_project

        remove_compose_project(record["compose_project"])
    for path in record.get("cgroups", []):
        report.processes_killed += _remove_cgroup(Path(path))
        report.cgroups_removed += 1
    hostdir.remove_root(root, bool(record.get("tmpfs")))
    if root.exists():
        shutil.rmtree(root, ignore_errors=True)
    report.sandboxes.append(root.name)


def _kill_stranded(state: Path) -> int:
    """SIGKILL every bwrap of a sandbox under `state` that is gone or whose owner is dead,
    found by the bind of its app/ in their argv. A namespace init whose bwrap died while
    it set up waits forever, outside the cgroups and the record; it may even appear after
    its sandbox was reclaimed (an owner killed between fork and exec of bwrap)."""
    bind = b"\0--bind\0" + os.fsencode(str(state)) + b"/"
    killed = 0
    for pid in (int(e) for e in os.listdir("/proc") if e.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read()
            at = argv.find(bind)
            if at < 0 or _sandbox_live(state, os.fsdecode(argv[at + len(bind):].split(b"/", 1)[0])):
                continue
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except OSError:                 # gone meanwhile (ProcessLookupError is one)
            continue
    return killed


def _sandbox_live(state: Path, name: str) -> bool:
    """Checked after its bwrap or cgroup was seen: a live sandbox's dir exists before its
    cgroups, and its owner record before its first bwrap, so neither is a new one's."""
    root = state / name
    try:
        return root.is_dir() and _is_live(root)
    except FileNotFoundError:           # closed while we looked
        return False


def _remove_cgroup(path: Path) -> int:
    if not path.is_dir():
        return 0
    group = Cgroup("v1", {"": path})     # only pids() and remove() are used: version-agnostic
    killed = len(group.pids())
    group.remove()
    return killed


def _reap_cgroups(state: Path, report: ReapReport) -> None:
    """Empty posttrain-<id> groups under our own groups, older than GRACE_S, whose sandbox
    is not live here. Each is checked when seen, not against a list made earlier: a
    sandbox started since (in another thread) makes its group before its first process.
    Groups with processes are left alone, and young ones: they may belong to a sandbox
    under another POSTTRAIN_SANDBOX_DIR (a dead owner's owner.json names its groups)."""
    try:
        own = _own_paths()
    except OSError:
        return
    for controller, rel in own.items():
        parent = CGROUP_ROOT / controller / rel.lstrip("/") if controller else \
            CGROUP_ROOT / rel.lstrip("/")
        if not parent.is_dir():
            continue
        for child in parent.glob("posttrain-*"):
            if _stray_group(child, state):
                _remove_cgroup(child)
                report.cgroups_removed += 1


def _stray_group(group: Path, state: Path) -> bool:
    try:
        young = time.time() - group.stat().st_mtime < GRACE_S
    except FileNotFoundError:
        return False
    return not young and not Cgroup("v1", {"": group}).pids() and \
        not _sandbox_live(state, group.name.removeprefix("posttrain-"))
