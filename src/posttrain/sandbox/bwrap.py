"""The bubblewrap backend: Linux namespaces, a read-only system root, writable /app /tmp /logs.

Each sandbox owns a host directory (app/, tmp/, logs/ bound writable inside). Every
exec runs in a fresh bwrap whose pid namespace dies with it, so a timeout kills the
whole process tree, background children included. See docs/sandbox.md for the
threat model.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

from posttrain.errors import SandboxError
from posttrain.sandbox import bwrap_args
from posttrain.sandbox.base import Sandbox, SandboxSpec
from posttrain.sandbox.capture import capture
from posttrain.types import ExecResult

KILLED_EXIT = 128 + signal.SIGKILL


def state_dir() -> Path:
    """Where sandbox directories live on the host (POSTTRAIN_SANDBOX_DIR overrides)."""
    base = os.environ.get("POSTTRAIN_SANDBOX_DIR") or os.path.join(
        tempfile.gettempdir(), "posttrain-sandboxes")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def sandbox_path(root: Path, sandbox_path_: str) -> Path:
    """Map /app/x, /tmp/x or /logs/x to its host file under `root`, refusing escapes."""
    p = Path(os.path.normpath("/" + sandbox_path_.lstrip("/")))
    parts = p.parts
    if len(parts) < 2 or parts[1] not in bwrap_args.WRITABLE:
        raise SandboxError(f"{sandbox_path_!r} is not under /app, /tmp or /logs")
    host = root.joinpath(*parts[1:])
    area = (root / parts[1]).resolve()
    resolved = host.resolve()
    if resolved != area and area not in resolved.parents:
        raise SandboxError(f"{sandbox_path_!r} is a symlink that leaves the sandbox")
    return host


class BwrapSandbox(Sandbox):
    """One bubblewrap sandbox. Thread-safe: execs may run concurrently."""

    def __init__(self, spec: SandboxSpec):
        if spec.network not in ("no-network", "public"):
            raise SandboxError(f"network mode {spec.network!r} is not supported by the bwrap "
                               "backend (use 'no-network' or 'public')")
        self.spec = spec
        self.bwrap = bwrap_args.find_bwrap()
        self.id = uuid.uuid4().hex[:12]
        self.root = state_dir() / self.id
        for name in bwrap_args.WRITABLE:
            (self.root / name).mkdir(parents=True)
        bwrap_args.write_identity(self.root)
        self._runs: set[Run] = set()
        self._lock = threading.Lock()
        self._closed = False

    def host_path(self, sandbox_path_: str) -> Path:
        return sandbox_path(self.root, sandbox_path_)

    def _argv(self, command: str, env: dict[str, str] | None,
              mounts: dict[str, Path] | None, info_fd: int) -> list[str]:
        for dest, src in (mounts or {}).items():
            if not dest.startswith("/") or not Path(src).exists():
                raise SandboxError(f"bad mount {dest!r} <- {str(src)!r}: the sandbox path must "
                                   "be absolute and the host path must exist")
        workdir = self.spec.workdir
        if workdir.split("/")[1:2] and workdir.split("/")[1] in bwrap_args.WRITABLE:
            self.host_path(workdir).mkdir(parents=True, exist_ok=True)
        argv = bwrap_args.bwrap_argv(
            self.bwrap, self.root, network=self.spec.network, workdir=workdir,
            env=bwrap_args.base_env(self.spec.env, env), mounts=mounts,
            extra=["--info-fd", str(info_fd)])
        return argv + ["--", "/bin/bash", "-c", command]

    def exec(self, command: str, timeout_s: float = 60.0, env: dict[str, str] | None = None,
             mounts: dict[str, Path] | None = None) -> ExecResult:
        if self._closed:
            raise SandboxError(f"sandbox {self.id} is closed")
        info_r, info_w = os.pipe()
        argv = self._argv(command, env, mounts, info_fd=info_w)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True,
                                    pass_fds=(info_w,))
        finally:
            os.close(info_w)
        run = Run(proc, info_r)
        with self._lock:
            self._runs.add(run)
        try:
            return self._collect(run, start, timeout_s)
        finally:
            with self._lock:
                self._runs.discard(run)
            run.close()

    def _collect(self, run: "Run", start: float, timeout_s: float) -> ExecResult:
        proc, deadline = run.proc, start + timeout_s
        hard = max(self.spec.output_hard_limit, self.spec.output_limit)
        got = capture({"stdout": proc.stdout.fileno(), "stderr": proc.stderr.fileno()},
                      deadline=deadline, limit=self.spec.output_limit, hard_limit=hard,
                      kill=run.kill, done=lambda: proc.poll() is not None)
        timed_out = got.timed_out
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            run.kill()
        killed_by = "timeout" if timed_out else "output" if got.output_killed else "none"
        code = KILLED_EXIT if killed_by != "none" else exit_code_of(proc.returncode)
        return ExecResult(exit_code=code, stdout=got.text("stdout"), stderr=got.text("stderr"),
                          duration_s=time.monotonic() - start, timed_out=timed_out,
                          truncated=got.truncated, killed_by=killed_by)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            runs = list(self._runs)
        for run in runs:
            run.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def exit_code_of(returncode: int) -> int:
    """A shell-style exit code: 128+N for a process killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


class Run:
    """One running bwrap: its process and the --info-fd pipe that names the namespace's init."""

    def __init__(self, proc: subprocess.Popen, info_r: int):
        self.proc, self.info_r, self.child_pid = proc, info_r, None

    def _read_child_pid(self) -> int | None:
        if self.child_pid is None and self.info_r >= 0:
            os.set_blocking(self.info_r, False)
            try:
                self.child_pid = json.loads(os.read(self.info_r, 4096))["child-pid"]
            except (BlockingIOError, ValueError, KeyError):
                pass
        return self.child_pid

    def kill(self) -> None:
        """SIGKILL the namespace's init, so the kernel kills every process in it and
        bwrap exits only once they are all gone; then bwrap's own group, and wait."""
        child = self._read_child_pid()
        if child is not None and self.proc.poll() is None:
            _signal(lambda: os.kill(child, signal.SIGKILL))
        try:
            self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            pass
        _signal(lambda: os.killpg(self.proc.pid, signal.SIGKILL))
        self.proc.wait()

    def close(self) -> None:
        for f in (self.proc.stdout, self.proc.stderr):
            f.close()
        if self.info_r >= 0:
            os.close(self.info_r)
            self.info_r = -1


def _signal(send) -> None:
    try:
        send()
    except (ProcessLookupError, PermissionError):
        pass
