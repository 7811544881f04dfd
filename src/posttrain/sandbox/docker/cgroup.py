"""A container's control groups seen from the host: what hit a limit, and killing every
process but the container's init (and its main child) without restarting it.

Found through /proc/<init pid>/cgroup, so it works for cgroupfs and systemd drivers,
v1 and v2, as long as the engine runs on this host and we may read its groups.
"""

from __future__ import annotations

import time
from pathlib import Path

from posttrain.procs import kill_each
from posttrain.sandbox.cgroups import ROOT, Cgroup


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


class ContainerCgroup:
    def __init__(self, group: Cgroup, keep: set[int]):
        self.group, self.keep = group, keep

    @classmethod
    def find(cls, init_pid: int) -> "ContainerCgroup | None":
        """The groups of the container whose init is host pid `init_pid`; None if unseen."""
        try:
            lines = Path(f"/proc/{init_pid}/cgroup").read_text().splitlines()
        except OSError:
            return None
        dirs: dict[str, Path] = {}
        for line in lines:
            _, names, path = line.split(":", 2)
            for name in names.split(",") if names else [""]:
                if name in ("", "memory", "pids"):
                    dirs[name] = (ROOT / name / path.lstrip("/")) if name else ROOT / path.lstrip("/")
        version = "v1" if "pids" in dirs and "memory" in dirs else "v2"
        if version == "v2":
            dirs = {"": dirs.get("", ROOT)}
        else:
            dirs.pop("", None)
        if not all(d.is_dir() for d in dirs.values()):
            return None
        group = Cgroup(version, dirs)
        if init_pid not in group.pids():
            return None
        for _ in range(200):        # init forks `sleep infinity` just after the start
            if _children(init_pid):
                break
            time.sleep(0.005)
        return cls(group, {init_pid, *_children(init_pid)})

    @property
    def dirs(self) -> dict[str, Path]:
        return self.group.dirs

    def pids(self) -> list[int]:
        """Host pids in the container other than its init and main child."""
        return [p for p in self.group.pids() if p not in self.keep]

    def counters(self) -> dict[str, int]:
        return self.group.counters()

    def what_killed(self, before: dict[str, int]) -> str:
        after = self.counters()
        if after["oom_kill"] > before.get("oom_kill", 0):
            return "memory"
        if after["pids_max"] > before.get("pids_max", 0):
            return "pids"
        return "none"

    def kill_all_but(self) -> None:
        """SIGKILL every process except the kept ones (call while the container is frozen,
        so nothing forks in between; the kills land when it thaws)."""
        self.kill(self.group.pids())

    def kill(self, pids) -> None:
        """SIGKILL those of `pids` that are not kept."""
        kill_each(pid for pid in pids if pid not in self.keep)

    def wait_empty_but_init(self, timeout_s: float = 5.0) -> bool:
        """True once only the kept processes are left (killing stragglers as it waits)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            rest = [p for p in self.group.pids() if p not in self.keep]
            if not rest:
                return all(p in self.group.pids() for p in self.keep)
            self.kill_all_but()
            time.sleep(0.005)
        return False
