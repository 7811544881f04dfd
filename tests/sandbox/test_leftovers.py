"""No process outlives its sandbox, however the session ends: closed, timed out, stopped,
closed mid-command, its runner started by a thread that ended, its bwrap killed from
outside, its owner killed (then the reaper). Only our own sessions are looked at: each
test's state dir is in the argv of every bwrap it starts (and so of their namespace inits,
forks of bwrap), and the commands sleep for a marker duration."""

import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from posttrain.errors import SandboxError
from posttrain.sandbox import SandboxSpec, open_sandbox
from posttrain.sandbox import capture as capture_module
from posttrain.sandbox.bwrap import launch
from posttrain.sandbox.reaper import reap

MARKER = "4713.0917"
GENEROUS_S = 60.0           # for commands that must not time out before they are killed


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _ours(state, host_pids) -> list[int]:
    return [p for p in host_pids(str(state)) + host_pids(MARKER) if _alive(p)]


def _thread(fn) -> threading.Thread:
    t = threading.Thread(target=fn)
    t.start()
    return t


def _exec_unless_closed(sb, command: str) -> None:
    try:
        sb.exec(command, timeout_s=GENEROUS_S)
    except SandboxError:                # closed before the command began
        pass


def _end_every_way(sb_of, warm: bool, host_pids, wait_until):
    daemons = f"setsid sleep {MARKER} & (sleep {MARKER} &); true"
    with sb_of() as sb:                                     # closed with daemons running
        sb.exec(daemons)
    with sb_of() as sb:                                     # timed out
        assert sb.exec(f"{daemons}; sleep {MARKER}", timeout_s=0.5).timed_out
    with sb_of() as sb:                                     # stopped, then closed
        sb.exec(daemons)
        sb.stop_processes()
    for wait in (False, True):              # closed from a thread as it starts, or mid-command
        sb = sb_of()
        t = _thread(lambda: _exec_unless_closed(sb, f"sleep {MARKER}"))
        if wait:
            wait_until(lambda: host_pids(MARKER), "the command runs")
        sb.close()
        t.join()
    with sb_of() as sb:                                 # runner started by a thread that ends
        sb.stop_processes()
        _thread(lambda: sb.exec(daemons)).join()
        sb.exec(daemons)
    if warm:
        with sb_of() as sb:                     # its bwrap killed from outside between commands
            sb.exec(daemons)
            os.kill(sb._runner.ns.proc.pid, signal.SIGKILL)
            sb._runner.ns.proc.wait(timeout=10)     # else the next command may reach it dying
            sb.exec(daemons)
    with pytest.raises(RuntimeError), sb_of() as sb:        # the caller failed
        sb.exec(daemons)
        raise RuntimeError("the harness failed")


def test_no_process_outlives_its_sandbox(state, host_pids, wait_until, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_SANDBOX_DIR", str(state))
    _end_every_way(lambda: open_sandbox("bwrap"), True, host_pids, wait_until)
    _end_every_way(lambda: open_sandbox("bwrap", SandboxSpec(warm=False)), False, host_pids,
                   wait_until)
    wait_until(lambda: _ours(state, host_pids) == [], "every process of ours gone")


def test_close_while_the_runner_starts_leaves_nothing(state, host_pids, wait_until,
                                                      monkeypatch):
    monkeypatch.setenv("POSTTRAIN_SANDBOX_DIR", str(state))
    sb = open_sandbox("bwrap")
    sb.stop_processes()                         # the next exec starts a runner
    real_spawn = sb._spawn

    def spawn_then_close(*args, **kw):
        ns = real_spawn(*args, **kw)
        _thread(sb.close).join()                # lands before the runner is recorded
        return ns

    sb._spawn = spawn_then_close
    with pytest.raises(SandboxError, match="closed"):
        sb.exec("true")
    wait_until(lambda: _ours(state, host_pids) == [], "the late runner killed")


def test_close_from_another_thread_leaves_the_exec_its_pipes(host_pids, wait_until,
                                                             monkeypatch):
    """close() kills the runner an exec reads from; the exec, not close(), closes its pipes
    (closed under it, its next read failed with EBADF, or read another file's fd)."""
    sb = open_sandbox("bwrap")
    closing, closed, results = threading.Event(), threading.Event(), []
    real_read = capture_module._read_one

    def read_after_close(sel, key, out, limit):
        if callable(key.data) and closing.is_set():     # the runner's status pipe, at EOF
            closed.wait(timeout=GENEROUS_S)
        real_read(sel, key, out, limit)

    monkeypatch.setattr(capture_module, "_read_one", read_after_close)
    t = _thread(lambda: results.append(sb.exec(f"sleep {MARKER}", timeout_s=GENEROUS_S)))
    wait_until(lambda: host_pids(MARKER), "the command runs")
    closing.set()
    sb.close()
    closed.set()
    t.join()
    assert [r.exit_code for r in results] == [137]


def _mounted(pid: int, path: str) -> bool:
    try:
        with open(f"/proc/{pid}/mountinfo") as f:
            return path in f.read()
    except OSError:
        return False


def test_a_command_whose_bwrap_died_during_setup_is_killed(state, host_pids, wait_until,
                                                           monkeypatch):
    """bwrap's init sets --die-with-parent only once set up, in a session of its own: bwrap
    killed before that (from outside, or by the end of the thread that started it) leaves
    the init running the command. exec must still return only once it is all gone."""
    monkeypatch.setenv("POSTTRAIN_SANDBOX_DIR", str(state))
    real_enter = launch._enter_cgroup

    def bwrap_killed_while_init_sets_up(ns, cgroup, sync_w):
        init = ns.wait_init_pid(timeout_s=GENEROUS_S)
        wait_until(lambda: _mounted(init, "/run/ctl"), "the init waits on --block-fd")
        os.kill(init, signal.SIGSTOP)       # so it goes on only after bwrap is gone
        real_enter(ns, cgroup, sync_w)
        os.kill(ns.proc.pid, signal.SIGKILL)
        ns.proc.wait()
        os.kill(init, signal.SIGCONT)

    with open_sandbox("bwrap", SandboxSpec(warm=False)) as sb:
        if sb.cgroup is None:
            pytest.skip("needs cgroups (root): only then is the start gated on --block-fd")
        monkeypatch.setattr(launch, "_enter_cgroup", bwrap_killed_while_init_sets_up)
        r = sb.exec(f"setsid sleep {MARKER} & sleep {MARKER}", timeout_s=GENEROUS_S)
        assert r.exit_code == 137
        wait_until(lambda: _ours(state, host_pids) == [], "the orphaned command killed")


DIES_WHILE_BWRAP_STARTS = """
import os, signal
from posttrain.sandbox import open_sandbox
from posttrain.sandbox.bwrap import runner
real_spawn = runner.Namespace.spawn.__func__

def spawn_then_die(cls, argv, pass_fds, info_w, info_r, **popen):
    # A full --info-fd pipe holds bwrap after its clone(), before it lets its init go on:
    # then the owner dies, bwrap with it (EPIPE or --die-with-parent), and the init waits
    # forever, before it could be moved into the cgroups or recorded.
    os.set_blocking(info_w, False)
    try:
        while True:
            os.write(info_w, b" " * 4096)
    except BlockingIOError:
        pass
    ns = real_spawn(cls, argv, pass_fds, info_w, info_r, **popen)
    print(ns.proc.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

runner.Namespace.spawn = classmethod(spawn_then_die)
open_sandbox("bwrap")
"""

OPENS_AND_CLOSES = f"""
from posttrain.sandbox import open_sandbox
print("started", flush=True)
while True:
    with open_sandbox("bwrap") as sb:
        sb.exec("setsid sleep {MARKER} & sleep 0.01")
"""


def _owner(state, script: str) -> subprocess.Popen:
    env = {**os.environ, "POSTTRAIN_SANDBOX_DIR": str(state)}
    return subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                            text=True)


def test_owner_killed_while_bwrap_starts_leaves_nothing_after_reap(state, host_pids, wait_until):
    owner = _owner(state, DIES_WHILE_BWRAP_STARTS)
    bwrap = int(owner.stdout.readline())
    assert owner.wait(timeout=GENEROUS_S) == -signal.SIGKILL
    wait_until(lambda: not _alive(bwrap), "bwrap dies with its owner")
    assert _ours(state, host_pids), "the stranded namespace init was expected"
    reap(state)
    wait_until(lambda: _ours(state, host_pids) == [], "the reaper kills the stranded init")


def test_owner_killed_at_any_moment_leaves_nothing_after_reap(state, host_pids, wait_until):
    for _ in range(3):
        owner = _owner(state, OPENS_AND_CLOSES)
        assert owner.stdout.readline() == "started\n"
        time.sleep(random.uniform(0.0, 1.0))                # a random moment of its loop
        owner.kill()
        owner.wait()

    def reaped_clean() -> bool:     # reaping as each later run does: a stranded init may
        reap(state)                 # appear after a reap (its owner died in fork-exec)
        return _ours(state, host_pids) == []
    wait_until(reaped_clean, "every process of ours gone")
