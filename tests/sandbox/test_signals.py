"""SIGTERM unwinds like Ctrl-C; what a SIGKILLed run left is reclaimed by `posttrain sandbox reap`
and by the next command that opens a sandbox; a killed model import leaves no half model."""

import os
import signal
import subprocess
import sys
import time

import pytest

from posttrain.models.gguf import save_atomically


def _start(state, *args):
    env = {**os.environ, "POSTTRAIN_SANDBOX_DIR": str(state)}
    return subprocess.Popen([sys.executable, "-m", "posttrain.cli", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _run(state, *args):
    env = {**os.environ, "POSTTRAIN_SANDBOX_DIR": str(state)}
    return subprocess.run([sys.executable, "-m", "posttrain.cli", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def _sandboxes(state):
    return [p for p in state.iterdir() if not p.name.startswith((".", "etc-"))] if state.is_dir() else []


SLEEP = ("sleep", "60.4321")                 # the sandboxed command, found by its argv


def _wait_for_command(proc, host_pids, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if set(host_pids(SLEEP[1])) - {proc.pid}:     # the sandbox's command runs
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    pytest.fail("the sandbox's command did not start")


def _mounts_under(state) -> list[str]:
    return [line for line in open("/proc/self/mounts") if str(state) in line]


def test_sigterm_closes_the_sandbox_and_exits_143(state, host_pids):
    proc = _start(state, "sandbox", "run", "--", *SLEEP)
    _wait_for_command(proc, host_pids)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "Traceback" not in err, err
    assert _sandboxes(state) == [] and _mounts_under(state) == []


def test_sigkilled_leftovers_are_reclaimed_by_reap_and_by_the_next_sandbox(state, host_pids):
    for reclaim in (("sandbox", "reap"), ("sandbox", "run", "--", "true")):
        proc = _start(state, "sandbox", "run", "--", *SLEEP)
        _wait_for_command(proc, host_pids)
        proc.kill()
        proc.wait(timeout=30)
        assert len(_sandboxes(state)) == 1                      # the crash left it behind
        r = _run(state, *reclaim)
        assert r.returncode == 0, r.stderr
        assert _sandboxes(state) == [] and _mounts_under(state) == []
    assert "reclaimed" in _run(state, "sandbox", "reap").stdout


def test_a_failed_save_leaves_no_model(tmp_path):
    out = tmp_path / "models" / "m"

    def half(d):
        (d / "config.json").write_text("{}")
        raise KeyboardInterrupt                                  # killed mid-save

    with pytest.raises(KeyboardInterrupt):
        save_atomically(out, half)
    assert not out.exists() and list(out.parent.iterdir()) == []
    save_atomically(out, lambda d: (d / "config.json").write_text("{}"))
    assert (out / "config.json").is_file() and len(list(out.parent.iterdir())) == 1
