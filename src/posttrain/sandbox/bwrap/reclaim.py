"""What the bwrap backend leaves when its owner dies, reclaimed for sandbox/reaper.py: the
runner's process group and the cgroups an owner record names, then bwraps and empty
posttrain-<id> groups that no record names any more."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from posttrain.sandbox import hostdir
from posttrain.sandbox.base import ReapReport
from posttrain.sandbox.cgroups import ROOT as CGROUP_ROOT
from posttrain.sandbox.cgroups import Cgroup, own_paths


def reclaim(record: dict, report: ReapReport) -> None:
    """Kill the warm runner's process group (if it is still the one recorded) and remove
    the sandbox's cgroups with whatever still runs in them."""
    pid, start = record.get("runner_pid"), record.get("runner_start")
    if isinstance(pid, int) and start and hostdir.process_start(pid) == start:
        try:
            os.killpg(pid, signal.SIGKILL)
            report.processes_killed += 1
        except (ProcessLookupError, PermissionError):
            pass
    for path in record.get("cgroups", []):
        report.processes_killed += _remove_cgroup(Path(path))
        report.cgroups_removed += 1


def sweep(state: Path, live: Callable[[str], bool], report: ReapReport) -> None:
    """Stranded bwraps first, then stray groups (a killed bwrap's group may empty)."""
    report.processes_killed += _kill_stranded(state, live)
    _reap_cgroups(live, report)


def _kill_stranded(state: Path, live: Callable[[str], bool]) -> int:
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
            if at < 0 or live(os.fsdecode(argv[at + len(bind):].split(b"/", 1)[0])):
                continue
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except OSError:                 # gone meanwhile (ProcessLookupError is one)
            continue
    return killed


def _remove_cgroup(path: Path) -> int:
    if not path.is_dir():
        return 0
    group = Cgroup("v1", {"": path})     # only pids() and remove() are used: version-agnostic
    killed = len(group.pids())
    group.remove()
    return killed


def _reap_cgroups(live: Callable[[str], bool], report: ReapReport) -> None:
    """Empty posttrain-<id> groups under our own groups, older than hostdir.GRACE_S, whose
    sandbox is not live here. Each is checked when seen, not against a list made earlier: a
    sandbox started since (in another thread) makes its group before its first process.
    Groups with processes are left alone, and young ones: they may belong to a sandbox
    under another POSTTRAIN_SANDBOX_DIR (a dead owner's owner.json names its groups)."""
    try:
        own = own_paths()
    except OSError:
        return
    for controller, rel in own.items():
        parent = CGROUP_ROOT / controller / rel.lstrip("/") if controller else \
            CGROUP_ROOT / rel.lstrip("/")
        if not parent.is_dir():
            continue
        for child in parent.glob("posttrain-*"):
            if _stray_group(child, live):
                _remove_cgroup(child)
                report.cgroups_removed += 1


def _stray_group(group: Path, live: Callable[[str], bool]) -> bool:
    try:
        young = time.time() - group.stat().st_mtime < hostdir.GRACE_S
    except FileNotFoundError:
        return False
    return not young and not Cgroup("v1", {"": group}).pids() and \
        not live(group.name.removeprefix("posttrain-"))
