"""Backend selection and the unconfined `process` backend."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from posttrain.errors import SandboxError
from posttrain.sandbox import SandboxSpec, open_sandbox
from posttrain.sandbox.reaper import reap


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(SandboxError, match="unknown sandbox backend 'nope'.*bwrap"):
        open_sandbox("nope")


def test_default_backend_is_bwrap():
    with open_sandbox() as sb:
        assert type(sb).__name__ == "BwrapSandbox"


def test_process_backend_runs_in_its_dir(tmp_path):
    with open_sandbox("process", SandboxSpec(env={"X": "1"})) as sb:
        r = sb.exec("echo hi > f; echo $X; pwd")
        assert r.exit_code == 0 and r.stdout.splitlines()[0] == "1"
        assert sb.host_path("/app/f").read_text() == "hi\n"
        assert r.stdout.splitlines()[1] == str(sb.host_path("/app"))
        r = sb.exec("sleep 5", timeout_s=0.2)
        assert r.timed_out and r.killed_by == "timeout"
        with pytest.raises(SandboxError, match="cannot mount"):
            sb.exec("true", mounts={"/tests": tmp_path})
        root = sb.host_path("/app").parent
    assert not root.exists()


CRASHER = """
from posttrain.sandbox import open_sandbox
sb = open_sandbox("process")
print(sb.root, flush=True)
sb.exec("sleep 65" + "4.4321", timeout_s=600)   # split: this script's argv must not match
"""


def test_process_backend_left_by_a_crash_is_reclaimed(state, host_pids, wait_until):
    env = {**os.environ, "POSTTRAIN_SANDBOX_DIR": str(state)}
    proc = subprocess.Popen([sys.executable, "-c", CRASHER], stdout=subprocess.PIPE, text=True,
                            env=env)
    root = Path(proc.stdout.readline().strip())
    wait_until(lambda: host_pids("654.4321"), "the command runs")
    wait_until(lambda: "process_groups\": [[" in (root / "owner.json").read_text(),
               "its group is recorded")
    os.kill(proc.pid, signal.SIGKILL)                        # a crash: no cleanup ran
    proc.wait()
    assert host_pids("654.4321")                             # its own session outlives it
    report = reap(state)
    assert root.name in report.sandboxes and report.processes_killed == 1
    wait_until(lambda: host_pids("654.4321") == [], "the reaper killed it")
    assert not root.exists()
