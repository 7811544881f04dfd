"""The bubblewrap backend through the real binary: isolation, limits, lifecycle."""

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from posttrain.errors import SandboxError
from posttrain.sandbox import SandboxSpec, open_sandbox

REPO = Path(__file__).resolve().parents[3]


def test_exit_code_stdout_stderr(sandbox):
    r = sandbox.exec("echo out; echo err >&2; exit 7")
    assert (r.exit_code, r.stdout, r.stderr) == (7, "out\n", "err\n")
    assert not r.timed_out and r.killed_by == "none"
    assert sandbox.exec("no-such-binary-xyz").exit_code == 127


def test_runs_unprivileged_in_workdir(sandbox):
    r = sandbox.exec("id -u; pwd; echo $HOME")
    assert r.stdout.split() == ["1000", "/app", "/app"]


def test_timeout_kills_background_children(sandbox, host_pids):
    marker = "987.654321"
    r = sandbox.exec(f"setsid sleep {marker} & sleep {marker}", timeout_s=0.5)
    assert r.timed_out and r.killed_by == "timeout"
    assert r.duration_s < 60                # killed, not slept out (987 s), even on a busy host
    assert host_pids(marker) == []          # exec returns once the namespace is gone


def test_pid_file_child_dead_after_timeout(sandbox):
    sandbox.exec("(while :; do date +%s%N > /app/beat; sleep 0.02; done) & wait", timeout_s=0.3)
    beat = sandbox.host_path("/app/beat")
    first = beat.read_text()
    time.sleep(0.2)
    assert beat.read_text() == first


def test_no_network_to_host_loopback(sandbox):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(1.0)
    port = server.getsockname()[1]
    accepted = []
    t = threading.Thread(target=lambda: accepted.append(_accept(server)))
    t.start()
    r = sandbox.exec(f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED", timeout_s=5)
    t.join()
    server.close()
    assert "CONNECTED" not in r.stdout and r.exit_code != 0
    assert accepted == [None]


def _accept(server):
    try:
        return server.accept()
    except OSError:
        return None


@pytest.mark.parametrize("path", ["/usr/evil", "/etc/evil", "/evil", "/proc/evil", "/dev/evil",
                                  "/dev/shm/../evil"])
def test_writes_outside_writable_areas_fail(sandbox, path):
    r = sandbox.exec(f"echo x > {path}")
    assert r.exit_code != 0
    assert not Path(path).exists()


def test_writable_areas(sandbox):
    r = sandbox.exec("echo a > /app/a && echo t > /tmp/t && mkdir -p /logs/v && echo l > /logs/v/l")
    assert r.exit_code == 0
    assert sandbox.host_path("/logs/v/l").read_text() == "l\n"
    assert sandbox.host_path("/tmp/t").read_text() == "t\n"


@pytest.mark.parametrize("path", ["/root", "/home", "/work", "/var", "/etc/shadow", str(REPO)])
def test_host_paths_invisible(sandbox, path):
    r = sandbox.exec(f"ls -d {path}")
    assert r.exit_code != 0


def test_output_capped_and_flood_does_not_hang():
    with open_sandbox("bwrap", SandboxSpec(output_limit=1000, output_hard_limit=10_000_000)) as sb:
        r = sb.exec("head -c 3000000 /dev/zero | tr '\\0' a; echo done >&2")
        assert len(r.stdout) == 1000 and r.truncated
        assert r.stderr == "done\n" and r.exit_code == 0
        r = sb.exec("yes", timeout_s=120)
        assert r.killed_by == "output"


def test_non_utf8_output_is_replaced(sandbox):
    r = sandbox.exec("printf 'a\\xffb'")
    assert r.stdout == "a\ufffdb"


def test_env_scrubbed(sandbox, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_TEST_SECRET", "hunter2")
    r = sandbox.exec("env; cat /proc/self/environ", env={"EXTRA": "1"})
    assert "hunter2" not in r.stdout and "EXTRA=1" in r.stdout


def test_spec_env_and_workdir():
    with open_sandbox("bwrap", SandboxSpec(env={"FOO": "bar"}, workdir="/app/src")) as sb:
        assert sb.exec("echo $FOO; pwd").stdout.split() == ["bar", "/app/src"]


def test_mounts_read_only_and_only_for_one_command(sandbox, tmp_path):
    (tmp_path / "test.sh").write_text("echo from-tests\n")
    r = sandbox.exec("bash /tests/test.sh; touch /tests/x", mounts={"/tests": tmp_path})
    assert "from-tests" in r.stdout and r.exit_code != 0
    assert not (tmp_path / "x").exists()
    assert sandbox.exec("ls -A /tests").stdout == ""      # an empty mount point remains


def test_mount_outside_mount_points_runs_one_off(sandbox, tmp_path):
    (tmp_path / "d.txt").write_text("data\n")
    r = sandbox.exec("cat /data/d.txt; echo x > /data/y", mounts={"/data": tmp_path})
    assert r.stdout == "data\n" and r.exit_code != 0
    assert sandbox.exec("ls /data").exit_code != 0


def test_bad_mount_source(sandbox, tmp_path):
    with pytest.raises(SandboxError):
        sandbox.exec("true", mounts={"/tests": tmp_path / "missing"})


def test_host_path_mapping_and_escapes(sandbox):
    assert sandbox.host_path("/app/x").parent == sandbox.host_path("/app")
    with pytest.raises(SandboxError):
        sandbox.host_path("/etc/passwd")
    sandbox.exec("ln -s /root /app/link; ln -s ../../../.. /app/up; ln -s loop /app/loop")
    with pytest.raises(SandboxError):
        sandbox.host_path("/app/loop/x")
    with pytest.raises(SandboxError):
        sandbox.host_path("/app/link")
    with pytest.raises(SandboxError):
        sandbox.host_path("/app/up/etc")


def test_close_is_idempotent_and_removes_files():
    sb = open_sandbox("bwrap")
    sb.exec("echo hi > /app/f")
    root = sb.host_path("/app").parent
    assert root.exists()
    sb.close()
    sb.close()
    assert not root.exists()
    with pytest.raises(SandboxError):
        sb.exec("true")


def test_close_kills_running_command(host_pids, wait_until):
    sb = open_sandbox("bwrap")
    marker = "876.54321"
    results = []
    t = threading.Thread(target=lambda: results.append(sb.exec(f"sleep {marker}", timeout_s=300)))
    t.start()
    wait_until(lambda: host_pids(marker), "the command runs")
    sb.close()
    t.join(timeout=120)
    assert not t.is_alive()
    assert host_pids(marker) == []                           # close() returns once it is gone
    assert results and results[0].exit_code == 137          # a result, not an exception


def test_concurrent_execs(sandbox):
    results = [None] * 8

    def run(i):
        results[i] = sandbox.exec(f"echo {i}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(8)]
    assert os.path.isdir(sandbox.host_path("/app"))


def test_each_sandbox_has_its_own_unprivileged_host_uid(sandbox, monkeypatch):
    monkeypatch.delenv("POSTTRAIN_SANDBOX_UID", raising=False)
    with open_sandbox() as other:
        if os.geteuid() == 0:
            assert 0 not in (sandbox.uid, other.uid) and sandbox.uid != other.uid
            assert sandbox.host_path("/app").stat().st_uid == sandbox.uid
        else:
            assert sandbox.uid is None                      # runs as ourselves


def test_bwrap_killed_from_outside_mid_command_is_a_fault_then_recovers(sandbox):
    sandbox.exec("echo kept > /app/f")
    pid = sandbox._runner.ns.proc.pid
    threading.Timer(0.5, os.kill, (pid, 9)).start()     # the backend dies, not the command
    with pytest.raises(SandboxError, match="killed from outside"):
        sandbox.exec("sleep 30", timeout_s=60)
    assert sandbox.exec("cat /app/f").stdout == "kept\n"   # a fresh runner, the files as they were


def test_a_command_killing_its_own_shell_is_an_observation(sandbox):
    r = sandbox.exec("kill -9 $$")
    assert r.exit_code == 137 and r.killed_by == "none"
    assert sandbox.exec("echo on").stdout == "on\n"


def test_a_runner_started_by_a_thread_outlives_that_thread(sandbox):
    sandbox.stop_processes()                            # the next exec starts a runner
    worker = threading.Thread(target=sandbox.exec, args=("sleep 300 >/dev/null 2>&1 &",))
    worker.start()
    worker.join()
    pid = sandbox._runner.ns.proc.pid
    time.sleep(0.5)                                     # a parent-death signal would land by now
    assert sandbox.exec("pgrep -x sleep >/dev/null && echo up").stdout == "up\n"
    assert sandbox._runner.ns.proc.pid == pid
