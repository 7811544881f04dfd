"""Lifecycle of one bwrap sandbox: many execs, background processes, copy in/out,
snapshot/reset, runner restart, and bad input that must give a clear answer."""

import os
import stat

import pytest

from posttrain.errors import SandboxError
from posttrain.sandbox import SandboxSpec, open_sandbox


def test_many_execs_share_files_and_processes(sandbox):
    for i in range(20):
        assert sandbox.exec(f"echo {i} >> /app/log").exit_code == 0
    assert sandbox.host_path("/app/log").read_text().split() == [str(i) for i in range(20)]
    sandbox.exec("python3 -m http.server 8000 --bind 127.0.0.1 >/tmp/srv.log 2>&1 &")
    r = sandbox.exec("for i in $(seq 50); do python3 -c \"import urllib.request as u; "
                     "print(u.urlopen('http://127.0.0.1:8000/').status)\" 2>/dev/null && break; "
                     "sleep 0.1; done")
    assert r.stdout.strip() == "200"          # a server started earlier is still there


def test_timeout_restarts_runner_and_keeps_files(sandbox):
    sandbox.exec("echo keep > /app/k; sleep 1000 &")
    assert sandbox.exec("sleep 10", timeout_s=0.3).timed_out
    r = sandbox.exec("cat /app/k; pgrep -c sleep || true")
    assert r.stdout.split() == ["keep", "0"]


def test_cold_mode_runs_bwrap_per_exec():
    with open_sandbox("bwrap", SandboxSpec(warm=False)) as sb:
        assert sb.exec("echo $$").stdout.strip() == "2"    # a fresh pid namespace each time
        sb.exec("sleep 1000 &")
        assert sb.exec("pgrep -c sleep || true").stdout.strip() == "0"


def test_copy_in_and_out(sandbox, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "a.txt").write_text("A")
    sandbox.copy_in(src, "/app/proj")
    assert sandbox.exec("cat /app/proj/sub/a.txt && echo B > /app/proj/sub/a.txt").stdout == "A"
    sandbox.exec("ln -s /etc/hostname /app/proj/link")
    sandbox.copy_out("/app/proj", tmp_path / "out")
    assert (tmp_path / "out" / "sub" / "a.txt").read_text() == "B\n"
    assert (tmp_path / "out" / "link").is_symlink()          # copied as a link, not followed


def test_snapshot_and_reset(sandbox):
    sandbox.exec("echo base > /app/f; echo t > /tmp/t")
    sandbox.snapshot()
    sandbox.exec("echo changed > /app/f; echo new > /app/g; sleep 1000 &")
    sandbox.reset()
    r = sandbox.exec("cat /app/f; ls /app; ls -A /tmp; pgrep -c sleep || true")
    assert r.stdout.split() == ["base", "f", "0"]
    assert sandbox.exec("echo again > /app/f").exit_code == 0  # restored files stay writable


def test_host_written_files_given_to_sandbox(sandbox):
    path = sandbox.host_path("/app/hostfile")
    path.write_text("h")
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    sandbox.give(path)
    assert sandbox.exec("cat /app/hostfile && echo more >> /app/hostfile").stdout == "h"


def test_command_closing_stdout_early(sandbox):
    r = sandbox.exec("exec 1>&-; exec 2>&-; sleep 0.2; exit 4", timeout_s=5)
    assert r.exit_code == 4 and not r.timed_out


def test_nonexistent_binary_and_bad_workdir():
    with open_sandbox("bwrap", SandboxSpec(workdir="/nope")) as sb:
        r = sb.exec("true")
        assert r.exit_code == 1 and "/nope" in r.stderr
    with open_sandbox() as sb:
        r = sb.exec("/no/such/binary")
        assert r.exit_code == 127 and "No such file" in r.stderr


def test_more_memory_than_host_is_a_clear_error():
    with pytest.raises(SandboxError, match="this host has"):
        open_sandbox("bwrap", SandboxSpec(memory_mb=10**9))


def test_allowlist_network_is_refused_clearly():
    with pytest.raises(SandboxError, match="allowlist.*cannot be enforced"):
        open_sandbox("bwrap", SandboxSpec(network="allowlist"))


def test_public_network_shares_host_loopback():
    with open_sandbox("bwrap", SandboxSpec(network="public")) as sb:
        r = sb.exec("cat /proc/net/dev | grep -c :")
        assert int(r.stdout) >= 1


def test_cpu_time_limit():
    with open_sandbox("bwrap", SandboxSpec(cpu_time_s=1)) as sb:
        r = sb.exec("while :; do :; done", timeout_s=20)
        assert not r.timed_out and r.exit_code in (128 + 24, 137)   # SIGXCPU, then SIGKILL
        assert "cpu_time" in sb.enforcement and "rlimit-cpu 1" in sb.enforcement["cpu_time"]


def test_docker_backend_without_engine_names_what_is_missing(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")   # no engine there
    with pytest.raises(SandboxError, match="[Dd]ocker"):
        open_sandbox("docker")


@pytest.mark.parametrize("warm", [True, False])
def test_command_longer_than_one_argument(warm):
    heredoc = "cat > /app/big <<'EOF'\n" + ("b" * 99 + "\n") * 3000 + "EOF\nwc -c < /app/big"
    with open_sandbox("bwrap", SandboxSpec(warm=warm)) as sb:
        r = sb.exec(heredoc)
        assert (r.exit_code, r.stdout) == (0, "300000\n")


def test_docker_backend_without_cli_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))                 # no docker binary anywhere
    with pytest.raises(SandboxError, match="no `docker` CLI on PATH"):
        open_sandbox("docker")
