"""Per-sandbox control groups: memory, pids and CPU limits, and counters that say what hit.

Child groups are made under this process's own group (so our parent's accounting still
holds), on cgroup v2 when it delegates the controllers, or on v1 (memory, pids, cpu
hierarchies) when they are writable, as for root on most hosts. Where neither works,
`Cgroup.open` returns None and the sandbox falls back to rlimits.
"""

from __future__ import annotations

import time
from pathlib import Path

from posttrain.procs import kill_each

ROOT = Path("/sys/fs/cgroup")


def own_paths() -> dict[str, str]:
    """{controller or "": path} from /proc/self/cgroup ("" is the v2 hierarchy)."""
    paths = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        for name in names.split(",") if names else [""]:
            paths[name] = path
    return paths


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _counter(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


class Cgroup:
    """The groups of one sandbox; `version` is "v1" or "v2"."""

    def __init__(self, version: str, dirs: dict[str, Path]):
        self.version, self.dirs = version, dirs

    @classmethod
    def open(cls, name: str, memory_mb: int | None, pids: int | None,
             cpus: float | None) -> "Cgroup | None":
        """Create the groups with these limits; None where the host does not allow it."""
        v1 = ("memory", "pids", "cpu") if cpus else ("memory", "pids")
        for make in (cls._make_v2, lambda n: cls._make_v1(n, v1)):
            try:
                group = make(name)
            except OSError:
                continue
            if group is not None:
                try:
                    group._limit(memory_mb, pids, cpus)
                    return group
                except OSError:
                    group.remove()
        return None

    @classmethod
    def _make_v2(cls, name: str) -> "Cgroup | None":
        if not (ROOT / "cgroup.controllers").exists():
            return None
        path = ROOT / own_paths()[""].lstrip("/") / name
        path.mkdir()
        group = cls("v2", {"": path})
        if not all((path / f).exists() for f in ("memory.max", "pids.max", "cpu.max")):
            group.remove()
            return None
        return group

    @classmethod
    def _make_v1(cls, name: str, controllers: tuple[str, ...]) -> "Cgroup | None":
        """One group per v1 hierarchy; each costs a slow migration per process, so only
        the hierarchies a limit needs (cpu only when there is a CPU share)."""
        own = own_paths()
        if not all((ROOT / c / "cgroup.procs").exists() and c in own for c in controllers):
            return None
        dirs = {}
        group = cls("v1", dirs)
        try:
            for c in controllers:
                path = ROOT / c / own[c].lstrip("/") / name
                path.mkdir()
                dirs[c] = path
        except OSError:
            group.remove()
            raise
        return group

    def _file(self, controller: str, v1: str, v2: str) -> Path:
        return self.dirs[""] / v2 if self.version == "v2" else self.dirs[controller] / v1

    def _limit(self, memory_mb: int | None, pids: int | None, cpus: float | None) -> None:
        if memory_mb:
            limit = str(memory_mb * 1024 * 1024)
            _write(self._file("memory", "memory.limit_in_bytes", "memory.max"), limit)
            swap = self._file("memory", "memory.memsw.limit_in_bytes", "memory.swap.max")
            if swap.exists():
                _write(swap, limit if self.version == "v1" else "0")
        if pids:
            _write(self._file("pids", "pids.max", "pids.max"), str(pids))
        if cpus:
            if self.version == "v2":
                _write(self.dirs[""] / "cpu.max", f"{int(cpus * 100000)} 100000")
            else:
                _write(self.dirs["cpu"] / "cpu.cfs_period_us", "100000")
                _write(self.dirs["cpu"] / "cpu.cfs_quota_us", str(int(cpus * 100000)))

    def exists(self) -> bool:
        return all(d.is_dir() for d in self.dirs.values())

    def procs_files(self) -> list[str]:
        """The cgroup.procs files a new process must join (one per hierarchy)."""
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def counters(self) -> dict[str, int]:
        """How often the memory limit killed and the pids limit refused a fork, so far."""
        return {
            "oom_kill": _counter(self._file("memory", "memory.oom_control", "memory.events"),
                                 "oom_kill"),
            "pids_max": _counter(self._file("pids", "pids.events", "pids.events"), "max"),
        }

    def pids(self) -> list[int]:
        out: set[int] = set()
        for f in self.procs_files():
            try:
                out.update(int(p) for p in Path(f).read_text().split())
            except OSError:
                pass
        return sorted(out)

    def kill_all(self, timeout_s: float = 2.0) -> bool:
        """SIGKILL every process in the groups until none is left; True when empty."""
        deadline = time.monotonic() + timeout_s
        while (pids := self.pids()) and time.monotonic() < deadline:
            kill_each(pids)
            time.sleep(0.005)
        return not self.pids()

    def remove(self) -> None:
        """Kill what is left and delete the groups; safe to call twice."""
        if self.pids():
            self.kill_all()
        for path in self.dirs.values():
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
