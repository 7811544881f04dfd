"""`posttrain tasks import-tb1 / new / list`: Terminal-Bench 1 tasks become Harbor tasks that
run through the real sandbox; a scaffolded task validates clean; the list shows statuses."""

import json
import subprocess
import sys

import pytest

from posttrain.agent.trial import open_task_sandbox, run_oracle, verify
from posttrain.errors import TaskError
from posttrain.tasks import read_task
from posttrain.tasks.tb1.importer import import_tb1

# A stand-in for pytest (no network in tests to install it): prints pytest's -rA summary lines.
TEST_OUTPUTS = """import sys
ok = open('/app/hello.txt').read().strip() == 'Hello, world!' if __import__('os').path.exists('/app/hello.txt') else False
print(('PASSED' if ok else 'FAILED') + ' test_outputs.py::test_hello_file')
sys.exit(0 if ok else 1)
"""


def _tb1_task(root, name="hello-world", solution="solution.sh"):
    d = root / name
    (d / "tests").mkdir(parents=True)
    (d / "task.yaml").write_text(
        'instruction: |-\n  Create /app/hello.txt with "Hello, world!" as the content.\n'
        "author_name: posttrain\ndifficulty: easy\ncategory: file-operations\ntags: [trivial]\n"
        "parser_name: pytest\nmax_agent_timeout_sec: 120\nmax_test_timeout_sec: 30\n")
    (d / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\nCOPY notes.txt /app/\n")
    (d / "notes.txt").write_text("context file\n")
    (d / "docker-compose.yaml").write_text("services: {client: {command: sleep infinity}}\n")
    (d / "run-tests.sh").write_text("#!/bin/bash\npython3 $TEST_DIR/test_outputs.py\n")
    (d / "tests" / "test_outputs.py").write_text(TEST_OUTPUTS)
    if solution == "solution.sh":
        (d / "solution.sh").write_text('#!/bin/bash\necho "Hello, world!" > /app/hello.txt\n')
    else:
        (d / "solution.yaml").write_text(
            '- command: echo "Hello, world!" > /app/hello.txt\n  min_timeout_sec: 1\n')
    return d


def test_imported_tb1_task_runs_and_scores(tmp_path):
    _tb1_task(tmp_path / "tb1")
    [path] = import_tb1(tmp_path / "tb1", tmp_path / "out")
    task = read_task(path)
    assert task.instruction.startswith("Create /app/hello.txt")
    assert task.config.agent.timeout_sec == 120 and task.config.verifier.timeout_sec == 30
    assert task.config.metadata["category"] == "file-operations"
    assert task.config.network_mode == "public"
    assert (path / "environment/notes.txt").is_file()
    assert not (path / "environment/docker-compose.yaml").exists()
    with open_task_sandbox(task) as sb:
        assert sb.exec("cat /app/notes.txt", timeout_s=10).stdout == "context file\n"
        assert verify(task, sb).reward == 0.0
    with open_task_sandbox(task) as sb:
        run_oracle(task, sb)
        assert verify(task, sb).reward == 1.0


def test_solution_yaml_becomes_solve_sh_and_steps(tmp_path):
    _tb1_task(tmp_path / "tb1", solution="solution.yaml")
    [path] = import_tb1(tmp_path / "tb1", tmp_path / "out")
    assert read_task(path).oracle_steps() == ['echo "Hello, world!" > /app/hello.txt']


def test_bad_tb1_input_is_one_line(tmp_path):
    d = _tb1_task(tmp_path / "tb1")
    (d / "run-tests.sh").unlink()
    with pytest.raises(TaskError, match="missing run-tests.sh"):
        import_tb1(d, tmp_path / "out")
    (d / "task.yaml").write_text("instruction: [unclosed\n")
    with pytest.raises(TaskError, match="not valid YAML"):
        import_tb1(d, tmp_path / "out")
    with pytest.raises(TaskError, match="no Terminal-Bench tasks"):
        import_tb1(tmp_path, tmp_path / "out")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "posttrain.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_new_task_validates_clean_and_lists(tmp_path):
    assert _cli("tasks", "new", "hello", "--dir", tmp_path / "tasks").returncode == 0
    assert "already exists" in _cli("tasks", "new", "hello", "--dir", tmp_path / "tasks").stderr
    (tmp_path / "tasks" / "broken").mkdir()
    (tmp_path / "tasks" / "broken" / "task.toml").write_text("[x\n")
    out = tmp_path / "v.json"
    r = _cli("validate", tmp_path / "tasks", "--out", out, "--runs", "2")
    statuses = {t["id"]: t["status"] for t in json.loads(out.read_text())["tasks"]}
    assert statuses == {"hello": "ok", "broken": "broken"} and r.returncode == 1
    r = _cli("tasks", "list", tmp_path / "tasks", "--manifest", out)
    assert r.returncode == 0 and "hello" in r.stdout and "2 tasks" in r.stdout
    assert "broken" in r.stdout and "ok" in r.stdout
