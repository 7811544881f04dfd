"""`posttrain eval --sandbox docker` on Terminal-Bench-layout tasks built from their
Dockerfiles by a real engine: every trial runs to a verdict (slow: image builds)."""

import json

import pytest
from typer.testing import CliRunner

from posttrain.cli import _register_all, app
from posttrain.models.tiny import build_tiny_model, build_tokenizer, save_policy

pytestmark = pytest.mark.slow


def test_eval_on_docker_tasks(tmp_path, docker_tb1_tasks):
    tok = build_tokenizer(["<bash>cat /app/sales.csv</bash>", "<submit/>"] * 20, vocab_size=300)
    ckpt = save_policy(build_tiny_model(len(tok), seed=0), tok, tmp_path / "ckpt")
    _register_all()
    args = ["eval", "--tasks", str(docker_tb1_tasks), "--model", str(ckpt), "-k", "2",
            "--jobs", "2", "--job", "docker", "--jobs-dir", str(tmp_path / "jobs"),
            "--sandbox", "docker", "--max-turns", "2", "--max-reply-tokens", "8"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    s = json.loads((tmp_path / "jobs" / "docker" / "result.json").read_text())
    assert s["n_trials"] == 6 and s["complete"], s
    assert s["counts"].get("infra_error", 0) == 0, s["counts"]
    trial = json.loads((tmp_path / "jobs/docker/csv-total__1/result.json").read_text())
    assert trial["n_turns"] >= 1
