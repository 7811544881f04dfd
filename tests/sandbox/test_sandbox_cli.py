"""`posttrain sandbox run` end to end, as a user types it."""

import json
import subprocess
import sys

CLI = [sys.executable, "-c", "from posttrain.cli import main; main()", "sandbox", "run"]


def _run(*args, timeout=60):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


def test_exit_status_and_output():
    r = _run("--", "bash", "-c", "echo hi; exit 3")
    assert r.returncode == 3 and r.stdout == "hi\n" and "killed_by=none" in r.stderr


def test_json_with_limits():
    r = _run("--json", "--memory-mb", "64", "--pids", "16", "--timeout", "1", "--", "sleep", "5")
    out = json.loads(r.stdout)
    assert out["timed_out"] and out["killed_by"] == "timeout"
    assert "64 MB" in out["enforcement"]["memory"] and "16" in out["enforcement"]["pids"]


def test_task_environment(tmp_path):
    task = tmp_path / "hello"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "instruction.md").write_text("Say hello.\n")
    (task / "task.toml").write_text('[environment]\nmemory_mb = 512\nenv = { GREET = "hi" }\n')
    (task / "tests" / "test.sh").write_text("true\n")
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm\nCOPY data /app/data\n")
    (task / "environment" / "data").write_text("payload\n")
    r = _run("--task", str(task), "--json", "--", "bash", "-c", "cat /app/data; echo $GREET")
    out = json.loads(r.stdout)
    assert out["stdout"] == "payload\nhi\n" and "512 MB" in out["enforcement"]["memory"]


def test_bad_network_mode_is_one_line_error():
    r = _run("--network", "allowlist", "--", "true")
    assert r.returncode == 2 and "error:" in r.stderr and "Traceback" not in r.stderr
