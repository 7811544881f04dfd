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
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from posttrain.sandbox import hostdir

RUNNER_SCRIPT = r"""
exec 2>&1
while IFS= read -r n; do
  ( . "/run/ctl/$n.sh" ) >"/run/ctl/$n.out" 2>"/run/ctl/$n.err" </dev/null
  echo "$n $?"
done
"""
STATUS = re.compile(rb"^(\d+) (\d+)$", re.M)
CHILD_PID = re.compile(rb'"child-pid":\s*(\d+)')
INIT_EXIT_WAIT_S = 30.0     # a killed init exits once every process of its namespace has


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

# bwrap's --die-with-parent fires when the *thread* that forked it ends, so a runner
# started from a short-lived worker thread would die with it. Forks happen on these
# threads instead, which live as long as the process.
_SPAWNER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="bwrap-spawn")


class Namespace:
    """One running bwrap: its process, and the namespace init it forks, whose pid bwrap
    reports on --info-fd. bwrap's init leaves bwrap's process group (setsid) and only
    dies with bwrap once it is set up, so the init is held by a pidfd: a kill reaches it
    even after bwrap itself was killed."""

    def __init__(self, proc: subprocess.Popen, info_r: int):
        self.proc, self.info_r, self.child_pid = proc, info_r, None
        self._info = bytearray()
        self._init_fd, self._fd_lock = -1, threading.Lock()

    @classmethod
    def spawn(cls, argv: list[str], pass_fds: tuple[int, ...], info_w: int,
              info_r: int, **popen) -> "Namespace":
        try:
            proc = _SPAWNER.submit(subprocess.Popen, argv, start_new_session=True,
                                   pass_fds=pass_fds, **popen).result()
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
                self._hold_init()
        return self.child_pid

    def _hold_init(self) -> None:
        """Open a pidfd on the init if it is ours: a fork of bwrap, so its argv is bwrap's
        (a pid reused by another process after the init died fails this)."""
        with self._fd_lock:
            try:
                fd = os.pidfd_open(self.child_pid)
            except OSError:                 # gone already, or a kernel without pidfds
                return
            ours = _is_tail(_argv_of(self.child_pid), self.proc.args)
            if ours and _signal(fd, lambda f: signal.pidfd_send_signal(f, 0)):
                self._init_fd = fd          # alive after the check: the pid was its own
            else:
                os.close(fd)

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
        """SIGKILL the namespace's init (the kernel kills every process in it) and bwrap's
        own group (an init still setting up is in it), and wait until both are gone."""
        if self._kill_init() and self.proc.poll() is None:
            self.proc.wait()    # bwrap exits once it has reaped its init: the namespace is gone
        _signal(self.proc.pid, lambda pid: os.killpg(pid, signal.SIGKILL))
        self.proc.wait()
        self._kill_init()       # reported just now: it may have left bwrap's group already
        with self._fd_lock:
            if self._init_fd >= 0:
                _readable(self._init_fd, INIT_EXIT_WAIT_S)   # readable once it has exited

    def _kill_init(self) -> bool:
        """By its pidfd; else by pid while bwrap, its parent, has not exited (so the pid is
        still the init's). False when there is nothing to signal."""
        self.init_pid()
        with self._fd_lock:
            if self._init_fd >= 0:
                return _signal(self._init_fd,
                               lambda fd: signal.pidfd_send_signal(fd, signal.SIGKILL))
        if self.child_pid is not None and self.proc.poll() is None:
            return _signal(self.child_pid, lambda pid: os.kill(pid, signal.SIGKILL))
        return False

    def close(self) -> None:
        """Close our ends of its pipes and the pidfd; idempotent, safe from two threads."""
        with self._fd_lock:
            for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if f is not None:
                    try:
                        f.close()
                    except OSError:      # unflushed bytes to a dead runner
                        pass
            for name in ("info_r", "_init_fd"):
                if getattr(self, name) >= 0:
                    os.close(getattr(self, name))
                    setattr(self, name, -1)


def _argv_of(pid: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return None


def _is_tail(cmdline: bytes | None, args: list[str]) -> bool:
    """Whether /proc's NUL-separated cmdline is the whole of args or a tail of it (bwrap's
    argv follows setpriv's options)."""
    full = b"".join(os.fsencode(a) + b"\0" for a in args)
    if not cmdline or not full.endswith(cmdline):
        return False
    return len(cmdline) == len(full) or full[-len(cmdline) - 1] == 0


def _signal(target: int, send) -> bool:
    """send(target); False when the process is gone or not ours to signal."""
    try:
        send(target)
        return True
    except (ProcessLookupError, PermissionError):
        return False


class Runner:
    """The runner loop in a Namespace; one command at a time (callers serialise)."""

    def __init__(self, ns: Namespace, ctl: Path, uid: int | None):
        self.ns, self.ctl, self.n, self.uid = ns, ctl, 0, uid
        self._status = bytearray()
        self.exit_code: int | None = None
        self.dead = False
        self.host_killed = False    # we killed it (a timeout, a quota, close)

    def killed_from_outside(self, wait_s: float = 1.0) -> bool:
        """Dead mid-command with bwrap itself ended by a signal nobody here sent: the backend
        died (a command that kills its own shell leaves bwrap to exit with a code)."""
        if not self.dead or self.host_killed:
            return False
        try:
            return self.ns.proc.wait(timeout=wait_s) < 0
        except subprocess.TimeoutExpired:
            return False

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


def oldest_child(pid: int) -> list[int]:
    """The runner's bash: the first child of its namespace's init (orphans it adopts later
    all started after it)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    started = {int(c): hostdir.process_start(int(c)) for c in children}
    alive = [c for c, t in started.items() if t is not None]
    return [min(alive, key=lambda c: int(started[c]))] if alive else []


def once(fn):
    """fn, callable many times, run only the first."""
    done = []

    def call():
        if not done:
            done.append(True)
            fn()
    return call
