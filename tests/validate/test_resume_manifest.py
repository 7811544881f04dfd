"""Resume after an interruption without re-running finished checks; the manifest, the
HTML report and the CLI exit code; load_manifest / usable_tasks for training and eval."""

import json
import subprocess
import sys

import pytest

from posttrain.errors import ConfigError
from posttrain.tasks import load_tasks
from posttrain.tasks.suites import terminal_basics
from posttrain.validate import load_manifest, usable_tasks
from posttrain.validate.runner import task_dirs, validate_dirs

from defective import write_all


def _run(root, cfg, state, on_check):
    return list(validate_dirs(task_dirs(root), cfg, state, 1, on_check))


def test_interrupted_run_resumes_without_rerunning_checks(tmp_path, quick_cfg):
    terminal_basics.generate(tmp_path / "s", 2, seed=1)
    fresh = []

    def interrupt_after_three(task_id, name, cached):
        fresh.append((task_id, name))
        if len(fresh) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "s", quick_cfg, tmp_path / "st", interrupt_after_three)
    second = []
    reports = _run(tmp_path / "s", quick_cfg, tmp_path / "st", lambda *a: second.append(a))
    reused = [(t, n) for t, n, cached in second if cached]
    assert reused == fresh                       # the three finished checks were not run again
    assert len(second) == 2 * 7 and len(reports) == 2
    third = []
    _run(tmp_path / "s", quick_cfg, tmp_path / "st", lambda *a: third.append(a))
    assert all(cached for _, _, cached in third)


def test_edited_task_is_checked_again(tmp_path, quick_cfg):
    task = terminal_basics.generate(tmp_path / "s", 1, seed=2)[0]
    _run(tmp_path / "s", quick_cfg, tmp_path / "st", None)
    (task.path / "instruction.md").write_text(task.instruction + "Be careful.\n")
    seen = []
    _run(tmp_path / "s", quick_cfg, tmp_path / "st", lambda *a: seen.append(a))
    assert not any(cached for _, _, cached in seen)


def test_cli_manifest_html_and_exit_code(tmp_path):
    write_all(tmp_path / "tasks", ["good", "bad-toml", "binary-instruction"])
    out = tmp_path / "report" / "v.json"
    out.parent.mkdir()
    r = subprocess.run([sys.executable, "-m", "posttrain.cli", "validate", str(tmp_path / "tasks"),
                        "--out", str(out), "--runs", "1", "--jobs", "2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr            # a broken task fails CI
    data = json.loads(out.read_text())
    assert {t["id"]: t["status"] for t in data["tasks"]}["bad-toml"] == "broken"
    assert {"id", "status", "checks", "difficulty"} <= set(data["tasks"][0])
    assert data["counts"]["broken"] == 2
    page = out.with_suffix(".html").read_text()   # v.json -> v.html: a w.json beside it keeps its own
    assert not (out.parent / "validation.html").exists()
    assert "sortBy(" in page and "binary-instruction" in page and "<script src" not in page
    statuses = load_manifest(out)
    assert statuses["binary-instruction"] == "broken"


def test_usable_tasks_keeps_ok_and_listed_only(tmp_path):
    terminal_basics.generate(tmp_path, 3, seed=0)
    tasks = load_tasks(tmp_path)
    manifest = {tasks[0].id: "ok", tasks[1].id: "hackable"}
    assert [t.id for t in usable_tasks(tasks, manifest)] == [tasks[0].id]
    assert len(usable_tasks(tasks, manifest, allow=("ok", "hackable"))) == 2
    (tmp_path / "m.json").write_text("{}")
    with pytest.raises(ConfigError, match="not a validation manifest"):
        load_manifest(tmp_path / "m.json")
