"""A persistent bash inside the sandbox that runs commands on request (warm exec).

Starting bwrap per command costs namespaces and mounts each time and loses background
processes between commands. Instead one bwrap runs this loop for the sandbox's life:

    host                          /run/ctl (host dir, bound read-only)
    write N.sh, mkfifo N.out/.err  ──►  runner: bash N.sh >N.out 2>N.err </dev/null
    send "N\\n" on runner stdin    ◄──  runner: echo "N $?" on its stdout

The host opens each FIFO (and a dummy writer, closed when the status arrives) before
sending N, so output is read live, nothing blocks, and nothing is lost.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import signal
import subprocess
import time
from pathlib import Path

RUNNER_SCRIPT = r"""
exec 2>&1
while IFS= read -r n; do
  ( . "/run/ctl/$n.sh" ) >"/run/ctl/$n.out" 2>"/run/ctl/$n.err" </dev/null
  echo "$n $?"
done
"""
STATUS = re.compile(rb"^(\d+) (\d+)$", re.M)
CHILD_PID = re.compile(rb'"child-pid":\s*(\d+)')


def wrapper_script(command: str, env: dict[str, str], workdir: str, ulimits: list[str],
                   command_file: str | None = None) -> str:
    """The per-exec script: limits, the whole environment, cd, then `bash -c command`
    (or `bash command_file` for a command too long for one argument, over 128 KiB)."""
    lines = [f"ulimit {u} 2>/dev/null" for u in ulimits]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    run = f"/bin/bash {shlex.quote(command_file)}" if command_file else \
        f"/bin/bash -c {shlex.quote(command)}"
    lines += [f"cd -- {shlex.quote(workdir)} || exit 1", f"exec {run}"]
    return "\n".join(lines) + "\n"



def _readable(fd: int, timeout_s: float) -> bool:
    """poll(), not select(): select() fails on fds above 1023, which busy hosts reach."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    return bool(poller.poll(timeout_s * 1000))

class Namespace:
    """One running bwrap: its process, and the --info-fd pipe that names the namespace init."""

    def __init__(self, proc: subprocess.Popen, info_r: int):
        self.proc, self.info_r, self.child_pid = proc, info_r, None
        self._info = bytearray()

    @classmethod
    def spawn(cls, argv: list[str], pass_fds: tuple[int, ...], info_w: int,
              info_r: int, **popen) -> "Namespace":
        try:
            proc = subprocess.Popen(argv, start_new_session=True, pass_fds=pass_fds, **popen)
        finally:
            os.close(info_w)
        return cls(proc, info_r)

    def init_pid(self) -> int | None:
        """Host pid of the namespace's init, once bwrap has reported it (non-blocking)."""
        while self.child_pid is None and self.info_r >= 0:
            os.set_blocking(self.info_r, False)
            try:
                data = os.read(self.info_r, 4096)
            except BlockingIOError:
                break
            if not data:
                break
            self._info += data              # bwrap writes its JSON in several pieces
            m = CHILD_PID.search(bytes(self._info))
            if m:
                self.child_pid = int(m.group(1))
        return self.child_pid

    def wait_init_pid(self, timeout_s: float) -> int | None:
        """Block until bwrap reports its init's pid (it does so right after cloning it)."""
        deadline = time.monotonic() + timeout_s
        while self.init_pid() is None and self.info_r >= 0:
            left = deadline - time.monotonic()
            if left <= 0 or not _readable(self.info_r, left):
                break
            if self.proc.poll() is not None:
                self.init_pid()
                break
        return self.child_pid

    def kill(self) -> None:
        """SIGKILL the namespace's init: the kernel kills every process in it, and bwrap
        exits only once they are all gone. Then bwrap's own group, and reap it."""
        child = self.init_pid()
        if child is not None and self.proc.poll() is None:
            _signal(child, lambda pid: os.kill(pid, signal.SIGKILL))
            self.proc.wait()        # bwrap reaps its init, which waits for the namespace
        _signal(self.proc.pid, lambda pid: os.killpg(pid, signal.SIGKILL))
        self.proc.wait()

    def close(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if f is not None:
                try:
                    f.close()
                except OSError:          # unflushed bytes to a dead runner
                    pass
        if self.info_r >= 0:
            os.close(self.info_r)
            self.info_r = -1


def _signal(pid: int, send) -> None:
    try:
        send(pid)
    except (ProcessLookupError, PermissionError):
        pass


class Runner:
    """The runner loop in a Namespace; one command at a time (callers serialise)."""

    def __init__(self, ns: Namespace, ctl: Path, uid: int | None):
        self.ns, self.ctl, self.n, self.uid = ns, ctl, 0, uid
        self._status = bytearray()
        self.exit_code: int | None = None
        self.dead = False

    @property
    def alive(self) -> bool:
        return not self.dead and self.ns.proc.poll() is None

    def begin(self, script: str) -> tuple[dict[str, int], list[int]]:
        """Stage command N and send it: returns its output fds and the dummy writers."""
        self.n += 1
        self.exit_code, self._status = None, bytearray()
        base = self.ctl / str(self.n)
        Path(f"{base}.sh").write_text(script)
        fds, dummies = {}, []
        for name, ext in (("stdout", "out"), ("stderr", "err")):
            os.mkfifo(f"{base}.{ext}", 0o600)
            if self.uid is not None:
                os.chown(f"{base}.{ext}", self.uid, self.uid)
            fds[name] = os.open(f"{base}.{ext}", os.O_RDONLY | os.O_NONBLOCK)
            dummies.append(os.open(f"{base}.{ext}", os.O_WRONLY | os.O_NONBLOCK))
        try:
            self.ns.proc.stdin.write(f"{self.n}\n".encode())
            self.ns.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            self.dead = True
        return fds, dummies

    def on_status(self, data: bytes) -> None:
        """Control-fd callback: parse "N code" lines; EOF means the runner died."""
        if not data:
            self.dead = True
            return
        self._status += data
        for m in STATUS.finditer(bytes(self._status)):
            if int(m.group(1)) == self.n:
                self.exit_code = int(m.group(2))

    def finished(self) -> bool:
        return self.exit_code is not None or self.dead

    def cleanup(self) -> None:
        """Remove command N's files (open fds stay valid)."""
        for ext in ("sh", "out", "err"):
            try:
                os.unlink(self.ctl / f"{self.n}.{ext}")
            except FileNotFoundError:
                pass
