"""The Sandbox interface: an isolated place to run commands, with limits.

A sandbox has four writable areas that the host can read and write directly:
/app (the task's working directory), /tmp, /logs, plus read-only mounts that the
harness adds (/tests after the agent phase, /solution for the oracle).
"""

from __future__ import annotations

import abc
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from posttrain.types import ExecResult

DEFAULT_OUTPUT_LIMIT = 64 * 1024


KILLED_EXIT = 137  # what a command killed by a limit or a deadline returns (SIGKILL's 128+9)


def exit_code_of(returncode: int) -> int:
    """A shell-style exit code: 128+N for a process killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


@dataclass
class SandboxSpec:
    """What one sandbox may use. None means the backend's default."""

    network: str = "no-network"          # "no-network" | "public" ("allowlist" is refused)
    memory_mb: int | None = None
    pids: int | None = None
    cpus: float | None = None
    cpu_time_s: int | None = None        # CPU seconds per process (RLIMIT_CPU)
    disk_mb: int | None = None           # size of the writable areas together
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/app"
    output_limit: int = DEFAULT_OUTPUT_LIMIT  # bytes kept of stdout and of stderr each
    output_hard_limit: int = 64 * 1024 * 1024  # total bytes read before the command is killed
    mount_points: tuple[str, ...] = ("/tests", "/solution")  # `mounts` the warm runner serves
    # Read by one backend and ignored by the others: a task's spec is made from its
    # task.toml before a backend is picked (agent/trial.py), so one spec serves them all.
    hidden: tuple[str, ...] = ()         # bwrap: HIDE_GROUPS of host paths shown empty (args.py)
    warm: bool = True                    # bwrap: one persistent runner (False: a bwrap per exec)
    user: str | None = None              # docker: "root" runs as root (bwrap is never root)
    verifier_user: str | None = None     # docker: who runs commands given /tests (None: `user`)
    build_timeout_s: float | None = None  # image builds (docker), from build_timeout_sec


@dataclass
class VerifierRun:
    """One run of a task's verifier: what the command did, the host dir holding what it
    wrote to /logs/verifier, and why its result cannot be trusted ("" when it can)."""

    result: ExecResult
    output: Path
    tampered: str = ""


def fresh_dir(path: Path) -> Path:
    """Replace whatever is at `path` (a dir, a file, a link) with an empty dir, from the
    host side, so no mode or link set inside can keep old contents."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


@dataclass
class ReapReport:
    """What one reaper pass reclaimed (sandbox/reaper.py)."""

    sandboxes: list[str] = field(default_factory=list)
    processes_killed: int = 0
    cgroups_removed: int = 0


class Reclaimer(Protocol):
    """What each backend offers the reaper for its own leftovers (bwrap/reclaim.py,
    docker/cleanup.py, process.py). The reaper calls every backend: each frees only what
    the fields it writes into owner.json name, and ignores records of other backends."""

    def reclaim(self, record: dict, report: ReapReport) -> None:
        """Free what one dead owner's record names (processes, containers, cgroups); the
        reaper removes the sandbox's directory itself."""

    def sweep(self, state: Path, live: Callable[[str], bool], report: ReapReport) -> None:
        """Free what this backend may leave that no record names. `live(name)` says whether
        the sandbox `name` under `state` is live: ask it when a leftover is seen, not before."""


class Sandbox(abc.ABC):
    """One isolated environment. Use as a context manager; close() reclaims everything."""

    spec: SandboxSpec

    @abc.abstractmethod
    def exec(self, command: str, timeout_s: float = 60.0, env: dict[str, str] | None = None,
             mounts: dict[str, Path] | None = None) -> ExecResult:
        """Run `bash -c command` inside; kill the whole process tree at timeout_s.

        `mounts` maps sandbox paths (e.g. "/tests") to host dirs bound read-only
        for this command only.
        """

    @abc.abstractmethod
    def host_path(self, sandbox_path: str) -> Path:
        """The host path backing a path under /app, /tmp or /logs (for copy in/out)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Kill everything still running and delete the sandbox's files. Idempotent."""

    def stop_processes(self) -> None:
        """Kill every process still running inside; files stay. Backends with processes
        that outlive a command override this."""

    def stop_all_but_servers(self) -> None:
        """End of the agent phase: kill every process except those that serve (hold a
        listening socket, sandbox/servers.py), which stay for the verifier; close() kills
        them. Backends that cannot tell servers apart stop everything."""
        self.stop_processes()

    def run_verifier(self, command: str, timeout_s: float, env: dict[str, str],
                     tests: Path) -> VerifierRun:
        """End the agent phase and run the verifier with `tests` at /tests. Backends that
        can, run it where nothing the agent left running reaches what it reads or writes
        (docs/sandbox.md, "Phases"); this default only stops every process but the servers
        and empties /logs/verifier first, as Harbor does."""
        self.stop_all_but_servers()
        output = fresh_dir(self.host_path("/logs/verifier"))
        self.give(output)
        result = self.exec(command, timeout_s=timeout_s, env=env, mounts={"/tests": tests})
        return VerifierRun(result, output)

    def verifier_path(self, sandbox_path: str) -> Path:
        """The host file behind `sandbox_path` as the last verifier run saw it (backends
        that give the verifier its own copy of the files override this)."""
        return self.host_path(sandbox_path)

    def healthy(self, timeout_s: float = 5.0) -> bool:
        """True when a trivial command runs and exits 0 in time."""
        try:
            r = self.exec("true", timeout_s=timeout_s)
        except Exception:
            return False
        return r.exit_code == 0 and not r.timed_out

    def give(self, host_path: Path) -> None:
        """Hand files the host wrote under host_path() to the sandbox user, so commands
        inside may change them. Call after writing into the sandbox directly; copy_in and
        prepare_environment do it themselves. No-op where the users are the same."""

    def copy_in(self, host_src: Path, sandbox_dst: str) -> None:
        """Copy a host file or dir to a path under /app, /tmp or /logs (symlinks kept as links)."""
        dst = self.host_path(sandbox_dst)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if Path(host_src).is_dir():
            shutil.copytree(host_src, dst, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(host_src, dst, follow_symlinks=False)
        self.give(dst)

    def copy_out(self, sandbox_src: str, host_dst: Path) -> None:
        """Copy a file or dir out of the sandbox; links are copied as links, never followed."""
        src = self.host_path(sandbox_src)
        Path(host_dst).parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir() and not src.is_symlink():
            shutil.copytree(src, host_dst, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(src, host_dst, follow_symlinks=False)

    def export_layer(self, dest: Path) -> bool:
        """Write what the sandbox changed outside /app, /tmp and /logs under dest (an episode
        checkpoint's snapshot); False when nothing there changed. Backends whose root is
        read-only have nothing to export."""
        return False

    def import_layer(self, src: Path) -> None:
        """Put back changes written by export_layer (a fresh sandbox of the same task)."""

    def _snapshot_dir(self) -> Path:
        return self.host_path("/app").parent / "snapshot"

    def snapshot(self) -> None:
        """Remember /app as it is now; reset() brings it back."""
        snap = self._snapshot_dir()
        shutil.rmtree(snap, ignore_errors=True)
        shutil.copytree(self.host_path("/app"), snap, symlinks=True)

    def reset(self) -> None:
        """Kill all processes, empty /tmp and /logs, restore /app from the last snapshot
        (or empty it when there is none)."""
        self.stop_processes()
        for area in ("/app", "/tmp", "/logs"):   # empty in place: the dirs are bind-mounted
            for child in self.host_path(area).iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        if self._snapshot_dir().is_dir():
            shutil.copytree(self._snapshot_dir(), self.host_path("/app"), symlinks=True,
                            dirs_exist_ok=True)
            self.give(self.host_path("/app"))

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
