"""The `process` backend: NO isolation, for debugging a task or the harness only.

Commands run on the host as the current user, in a temp dir that has app/, tmp/ and
logs/. There is no namespace, so absolute paths are the HOST's: `/app/x` in a
command means the host's /app, not the sandbox's; the command starts in <dir>/app,
and $APP_DIR, $TMPDIR and $LOGS_DIR point at the three areas, so only commands that
use relative paths or those variables behave as they would in a real sandbox.
Read-only mounts cannot be made without namespaces and raise SandboxError. A
timeout kills the command's process group; a child that calls setsid escapes it.
Never run untrusted code here; `open_sandbox` only builds it when asked by name.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from posttrain.errors import SandboxError
from posttrain.sandbox.base import KILLED_EXIT, Sandbox, SandboxSpec, exit_code_of
from posttrain.sandbox.capture import capture
from posttrain.sandbox.hostdir import sandbox_path
from posttrain.types import ExecResult


class ProcessSandbox(Sandbox):
    """A temp dir on the host; commands run there unconfined."""

    def __init__(self, spec: SandboxSpec):
        self.spec = spec
        self.root = Path(tempfile.mkdtemp(prefix="posttrain-process-"))
        for name in ("app", "tmp", "logs"):
            (self.root / name).mkdir()
        self._closed = False

    def host_path(self, sandbox_path_: str) -> Path:
        return sandbox_path(self.root, sandbox_path_)

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
        if not self._closed:
            self._closed = True
            shutil.rmtree(self.root, ignore_errors=True)


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
