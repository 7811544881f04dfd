"""`posttrain tasks ...` as a new user meets it: no silent mixing, every oracle run, full ids
in a pipe, the manifest's difficulty, and one line (not a traceback) for a bad path."""

import json
import subprocess
import sys


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "posttrain.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def _new(root, *names):
    for name in names:
        assert _cli("tasks", "new", name, "--dir", str(root)).returncode == 0


def test_generate_refuses_a_non_empty_directory_unless_overwrite(tmp_path):
    out = tmp_path / "out"
    assert _cli("tasks", "generate", str(out), "--n", "2", "--seed", "0").returncode == 0
    r = _cli("tasks", "generate", str(out), "--n", "1", "--seed", "1")
    assert r.returncode == 2 and "not empty" in r.stderr and "--overwrite" in r.stderr
    assert len(list(out.iterdir())) == 2
    r = _cli("tasks", "generate", str(out), "--n", "1", "--seed", "1", "--overwrite")
    assert r.returncode == 0, r.stderr
    assert len([p for p in out.iterdir() if not p.name.startswith(".")]) == 1


def test_oracle_runs_every_task_and_reports_each_failure(tmp_path):
    _new(tmp_path, "a", "b", "c", "d")
    (tmp_path / "b" / "task.toml").write_text("broken = [\n")
    (tmp_path / "c" / "solution" / "solve.sh").write_text("#!/bin/bash\nexit 3\n")
    r = _cli("tasks", "oracle", str(tmp_path))
    assert r.returncode == 1
    assert "2 of 4 oracles failed: b, c" in r.stderr
    assert "not valid TOML" in r.stdout and "│ d " in r.stdout


def test_list_in_a_pipe_keeps_full_ids_and_shows_the_manifests_difficulty(tmp_path):
    long_id = "a-task-id-long-enough-that-an-80-column-table-would-have-to-cut-it-short-somewhere"
    _new(tmp_path / "tasks", long_id)
    manifest = tmp_path / "validation.json"
    manifest.write_text(json.dumps({"tasks": [
        {"id": long_id, "status": "ok", "difficulty": {"label": "hard"}}]}))
    r = _cli("tasks", "list", str(tmp_path / "tasks"), "--manifest", str(manifest))
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if long_id in line)
    assert "hard" in row and "easy" not in row


def test_new_with_a_file_as_dir_is_one_line(tmp_path):
    (tmp_path / "f").write_text("")
    r = _cli("tasks", "new", "x", "--dir", str(tmp_path / "f"))
    assert r.returncode == 2 and "is a file" in r.stderr and "Traceback" not in r.stderr


def test_missing_tokenizer_knob_is_one_line(tmp_path):
    r = _cli("tasks", "generate", str(tmp_path / "o"), "--suite", "longctx", "--n", "1",
             "--knob", f"tokenizer={tmp_path / 'nope'}")
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr


def test_generate_refuses_a_split_that_is_a_path(tmp_path):
    out = tmp_path / "a" / "b" / "out"
    r = _cli("tasks", "generate", str(out), "--n", "1", "--split", "../../evil")
    assert r.returncode == 2 and "plain name" in r.stderr and "Traceback" not in r.stderr
    assert not list(tmp_path.rglob("*evil*"))


def test_write_task_refuses_an_id_that_is_a_path(tmp_path):
    import pytest

    from posttrain.errors import TaskError
    from posttrain.tasks import Task, TaskConfig, write_task

    config = TaskConfig.model_validate({"task": {"name": "x"}})
    with pytest.raises(TaskError, match="plain name"):
        write_task(Task("../evil", "hi", config, tmp_path), tmp_path / "out")
    assert not (tmp_path / "evil").exists()
