"""`posttrain eval --sandbox docker` on a multi-container task (main + an HTTP sidecar):
every trial runs to a verdict through the real engine and compose (slow: builds)."""

import json
import subprocess

import pytest
from compose_tasks import write_sidecar_task
from typer.testing import CliRunner

from posttrain.cli import _register_all, app
from posttrain.models.tiny import build_tiny_model, build_tokenizer, save_policy

pytestmark = pytest.mark.slow


def test_eval_on_a_compose_task(tmp_path, docker_engine):
    write_sidecar_task(tmp_path / "tasks")
    tok = build_tokenizer(["<bash>curl $API_URL/token</bash>", "<submit/>"] * 20, vocab_size=300)
    ckpt = save_policy(build_tiny_model(len(tok), seed=0), tok, tmp_path / "ckpt")
    _register_all()
    args = ["eval", "--tasks", str(tmp_path / "tasks"), "--model", str(ckpt), "-k", "2",
            "--jobs", "1", "--job", "compose", "--jobs-dir", str(tmp_path / "jobs"),
            "--sandbox", "docker", "--max-turns", "2", "--max-reply-tokens", "8"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    s = json.loads((tmp_path / "jobs" / "compose" / "result.json").read_text())
    assert s["n_trials"] == 2 and s["complete"], s
    assert s["counts"].get("infra_error", 0) == 0, s["counts"]
    for attempt in (0, 1):
        trial = json.loads((tmp_path / f"jobs/compose/sidecar-token__{attempt}/result.json").read_text())
        assert trial["status"] != "infra_error" and trial["reward"] == 0.0, trial
    left = subprocess.run(["docker", "ps", "-aq", "--filter", "label=com.docker.compose.project"],
                          capture_output=True, text=True).stdout.split()
    assert left == []
