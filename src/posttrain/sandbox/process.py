"""The `process` backend: NO isolation, for debugging a task or the harness only.

Commands run on the host as the current user, in a dir under the state dir (hostdir.py)
that has app/, tmp/ and logs/. There is no namespace, so absolute paths are the HOST's:
`/app/x` in a command means the host's /app, not the sandbox's; the command starts in <dir>/app,
and $APP_DIR, $TMPDIR and $LOGS_DIR point at the three areas, so only commands that
use relative paths or those variables behave as they would in a real sandbox.
Read-only mounts cannot be made without namespaces and raise SandboxError. A
timeout kills the command's process group; a child that calls setsid escapes it.
Never run untrusted code here; `open_sandbox` only builds it when asked by name.
The dir lives under the state dir with an owner record naming the commands' process
groups, so the reaper (`reclaim` below) kills them and removes the dir if we crash.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from posttrain.errors import SandboxError
from posttrain.sandbox import hostdir
from posttrain.sandbox.base import KILLED_EXIT, ReapReport, Sandbox, SandboxSpec, exit_code_of
from posttrain.sandbox.capture import capture
from posttrain.types import ExecResult


class ProcessSandbox(Sandbox):
    """A dir on the host; commands run there unconfined."""

    def __init__(self, spec: SandboxSpec):
        self.spec = spec
        self.root, _ = hostdir.create_root(f"process-{uuid.uuid4().hex[:12]}", None)
        self._groups: dict[int, str | None] = {}     # running commands: pgid -> start time
        self._lock = threading.Lock()
        self._closed = False
        hostdir.write_owner(self.root, process_groups=[])

    def host_path(self, sandbox_path_: str) -> Path:
        return hostdir.sandbox_path(self.root, sandbox_path_)

    def _running(self, pgid: int, start: str | None) -> None:
        """Record a command's process group for the reaper (start None: it has ended)."""
        with self._lock:
            if start is None:
                self._groups.pop(pgid, None)
            else:
                self._groups[pgid] = start
            if not self._closed:
                hostdir.write_owner(self.root, process_groups=list(self._groups.items()))

    def _env(self, extra: dict[str, str] | None) -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.root / "app"),
               "LANG": "C.UTF-8", "TERM": "xterm", "APP_DIR": str(self.root / "app"),
               "TMPDIR": str(self.root / "tmp"), "LOGS_DIR": str(self.root / "logs")}
        env.update(self.spec.env)
        env.update(extra or {})
        return env

    def exec(self, command: str, timeout_s: float = 60.0, env: dict[str, str] | None = None,
             mounts: dict[str, Path] | None = None) -> ExecResult:
        if self._closed:
            raise SandboxError("process sandbox is closed")
        if mounts:
            raise SandboxError("the process backend cannot mount "
                               f"{', '.join(mounts)}: use the bwrap backend")
        cwd = self.host_path(self.spec.workdir) if self.spec.workdir != "/" else self.root
        cwd.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        proc = subprocess.Popen(["/bin/bash", "-c", command], cwd=cwd, env=self._env(env),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        self._running(proc.pid, hostdir.process_start(proc.pid))
        try:
            return self._wait(proc, start, timeout_s)
        finally:
            self._running(proc.pid, None)

    def _wait(self, proc: subprocess.Popen, start: float, timeout_s: float) -> ExecResult:
        kill = lambda: _killpg(proc.pid)  # noqa: E731
        got = capture({"stdout": proc.stdout.fileno(), "stderr": proc.stderr.fileno()},
                      deadline=start + timeout_s, limit=self.spec.output_limit,
                      hard_limit=max(self.spec.output_hard_limit, self.spec.output_limit),
                      kill=kill, done=lambda: proc.poll() is not None)
        timed_out = got.timed_out
        try:
            proc.wait(timeout=max(0.0, start + timeout_s - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            kill()
            proc.wait()
        kill()  # background children of a finished command do not outlive it
        proc.stdout.close()
        proc.stderr.close()
        killed_by = "timeout" if timed_out else "output" if got.output_killed else "none"
        code = KILLED_EXIT if killed_by != "none" else exit_code_of(proc.returncode)
        return ExecResult(exit_code=code, stdout=got.text("stdout"), stderr=got.text("stderr"),
                          duration_s=time.monotonic() - start, timed_out=timed_out,
                          truncated=got.truncated, killed_by=killed_by)

    def close(self) -> None:
        with self._lock:
            closed, self._closed = self._closed, True
        if not closed:
            shutil.rmtree(self.root, ignore_errors=True)


def reclaim(record: dict, report: ReapReport) -> None:
    """For the reaper: kill the process groups of a dead owner's commands that still run."""
    for pgid, start in record.get("process_groups", []):
        if start and hostdir.process_start(pgid) == start:
            _killpg(pgid)
            report.processes_killed += 1


def sweep(state: Path, live: Callable[[str], bool], report: ReapReport) -> None:
    """Nothing: each command's group is in its sandbox's record."""


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
