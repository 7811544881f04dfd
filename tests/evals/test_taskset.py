"""The tasks an eval runs: broken ones skipped with a warning naming each, a manifest's verdicts kept."""

import json

import pytest

from posttrain.errors import TaskError
from posttrain.evals.taskset import read_tasks


def _break(task_dir, n):
    names = sorted(p.name for p in task_dir.iterdir())[:n]
    for name in names:
        (task_dir / name / "task.toml").write_text("broken = [\n")
    return names


def test_broken_tasks_are_skipped_with_a_warning_naming_each(task_dir):
    broken = _break(task_dir, 2)
    warnings = []
    tasks = read_tasks(str(task_dir), warn=warnings.append)
    assert len(tasks) == 2 and not {t.id for t in tasks} & set(broken)
    assert len(warnings) == 2 and all(f"skipped broken task {b}" in w for b, w in zip(broken, warnings))


def test_all_broken_is_an_error(task_dir):
    _break(task_dir, 4)
    with pytest.raises(TaskError, match="all 4 tasks are broken"):
        read_tasks(str(task_dir), warn=lambda m: None)


def test_a_manifest_keeps_only_its_ok_tasks(task_dir, tmp_path):
    ids = sorted(p.name for p in task_dir.iterdir())
    manifest = tmp_path / "validation.json"
    statuses = dict(zip(ids, ["ok", "broken", "flaky", "hackable"]))
    manifest.write_text(json.dumps({"tasks": [{"id": i, "status": s} for i, s in statuses.items()]}))
    warnings = []
    tasks = read_tasks(str(task_dir), str(manifest), warn=warnings.append)
    assert [t.id for t in tasks] == [ids[0]]
    assert len(warnings) == 1 and "left out 3 of 4 tasks" in warnings[0] and f"hackable: {ids[3]}" in warnings[0]


def test_eval_cli_carries_on_past_a_broken_task(task_dir, tmp_path):
    from scripted_server import free_port
    from test_cli_errors import posttrain

    broken = _break(task_dir, 1)[0]
    r = posttrain("eval", "--tasks", str(task_dir), "--model", "m",
                  "--base-url", f"http://127.0.0.1:{free_port()}/v1", cwd=tmp_path)
    assert f"warning: skipped broken task {broken}" in r.stderr
    assert r.returncode == 2 and "cannot reach the model endpoint" in r.stderr   # went on to the endpoint
