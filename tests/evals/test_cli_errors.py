"""Bad input to `posttrain eval` gives one clear line on stderr and exit 2, never a traceback."""

import os
import subprocess
import sys

import pytest

from scripted_server import free_port


def posttrain(*args, cwd=None):
    code = "from posttrain.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120,
                          env={**os.environ, "COLUMNS": "400"})


def _one_line_error(r, needle):
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_empty_task_dir(tmp_path):
    (tmp_path / "empty").mkdir()
    r = posttrain("eval", "--tasks", str(tmp_path / "empty"), "--model", "m",
                  "--base-url", "http://127.0.0.1:9/v1", cwd=tmp_path)
    _one_line_error(r, "the task directory is empty")


def test_unreachable_endpoint(tmp_path, task_dir):
    r = posttrain("eval", "--tasks", str(task_dir), "--model", "m",
                  "--base-url", f"http://127.0.0.1:{free_port()}/v1", cwd=tmp_path)
    _one_line_error(r, "cannot reach the model endpoint")
    jobs = tmp_path / "jobs"
    assert not jobs.exists() or not any(jobs.iterdir())  # no empty job directory left behind


@pytest.mark.parametrize("args,needle", [
    (["--model", "/no/such/ckpt"], "not a checkpoint directory"),
    (["--model", "m", "--base-url", "http://x/v1", "-k", "0"], "'-k'"),
    (["--model", "m", "--base-url", "http://x/v1", "--denominator", "some"], "denominator"),
    (["--model", "m", "--base-url", "http://x/v1", "--protocol", "morse"], "--protocol must be text or tools"),
    (["--model", "m", "--protocol", "tools"], "--protocol tools needs --base-url"),
    (["--model", "m", "--base-url", "http://x/v1", "--protocol", "text"], "takes its tokenizer from it"),
    (["--model", "m", "--base-url", "http://x/v1", "--context", "bogus"], "knob kind: Input should be 'keep_all'"),
    (["--model", "m", "--base-url", "http://x/v1", "--context", "foo=keep_all"], "no task has domain 'foo'"),
    (["--model", "m", "--base-url", "http://x/v1", "--otel-endpoint", "notaurl"], "--otel-endpoint: OTLP endpoint"),
])
def test_bad_flags(tmp_path, task_dir, args, needle):
    _one_line_error(posttrain("eval", "--tasks", str(task_dir), *args, cwd=tmp_path), needle)


def test_report_of_a_non_job(tmp_path):
    _one_line_error(posttrain("eval", "report", str(tmp_path)), "not an eval job")


def test_compare_with_a_job_without_scored_trials(tmp_path):
    from posttrain.evals.conditions import EvalConditions
    from posttrain.evals.jobdir import JobDir

    for name in ("a", "b"):
        JobDir(tmp_path / name).open(EvalConditions(model=name, protocol="tools", k=2)).close()
    _one_line_error(posttrain("eval", "compare", str(tmp_path / "a"), str(tmp_path / "b")), "no scored trials")


def test_step_dir_is_accepted_for_its_model(tmp_path, task_dir):
    """`--model runs/x/step-N` means the checkpoint at step-N/model/ (where rl saves it)."""
    from posttrain.evals.launch import EvalRequest, build_conditions
    from posttrain.tasks import load_tasks

    (tmp_path / "step-3" / "model").mkdir(parents=True)
    (tmp_path / "step-3" / "model" / "config.json").write_text("{}")
    c = build_conditions(EvalRequest(str(task_dir), str(tmp_path / "step-3")), load_tasks(task_dir))
    assert c.model == str((tmp_path / "step-3" / "model").resolve())


def test_approve_rule_without_a_reviewer(tmp_path, task_dir):
    r = posttrain("eval", "--tasks", str(task_dir), "--model", "m", "--approve-rule", "^rm", cwd=tmp_path)
    _one_line_error(r, "--approve-rule needs --approve or --approve-http")
