"""A shortened quickstart, end to end through the real CLI, sandbox and model."""

import json
import subprocess
import sys

import pytest

from posttrain.errors import ConfigError
from posttrain.recipes.config import load_config


def _run(tmp_path, *args):
    cmd = [sys.executable, "-m", "posttrain.cli", "quickstart", "--preset", "quick",
           "--set", f'runs_dir="{tmp_path}"', *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def test_quick_quickstart_writes_the_whole_run_dir(tmp_path):
    r = _run(tmp_path, "--name", "a")
    assert r.returncode == 0, r.stderr
    run = tmp_path / "a"
    summary = json.loads((run / "summary.json").read_text())
    for key in ("eval_before", "eval_after"):
        assert set(summary[key]) == {"pass_at_1", "ci_low", "ci_high", "n_tasks", "k"}
        assert summary[key]["n_tasks"] == 6 and summary[key]["k"] == 2
    assert summary["seed"] == 0 and summary["wall_s"] > 0
    engine = summary["engine"]
    assert {k: engine[k] for k in ("dtype", "dtype_reason", "batch_invariant")} == {
        "dtype": "float32", "dtype_reason": "asked", "batch_invariant": False}
    assert engine["attention"] in ("vllm-cpu", "torch") and engine["gemm"] in ("mkl", "onednn", "vllm")
    # RL - SFT, paired on the same held-out tasks and samples
    assert summary["paired_diff"] == pytest.approx(summary["eval_after"]["pass_at_1"]
                                                   - summary["eval_before"]["pass_at_1"])
    assert summary["paired_ci_low"] <= summary["paired_diff"] <= summary["paired_ci_high"]
    assert 0 <= summary["paired_p"] <= 1 and summary["paired_n_tasks"] == 6
    assert summary["cpu"]["model"] and summary["cpu"]["model"] in (run / "report.html").read_text()
    assert "RL &minus; SFT" in (run / "report.html").read_text() and "RL - SFT" in r.stdout
    assert (run / "checkpoint" / "model.safetensors").is_file()
    assert (run / "checkpoint" / "tokenizer.json").is_file()
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    assert "<img src=\"data:image/png;base64," in (run / "report.html").read_text()
    assert "<|assistant|>" in (run / "samples" / "rl-step-0000.txt").read_text()
    rows = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    assert {r["phase"] for r in rows} == {"sft", "rl"}
    # After each update the sampler must be on-policy again (no stale cached prefixes).
    assert all(r["mismatch_max_abs"] < 1e-4 for r in rows if r["phase"] == "rl")
    assert json.loads((run / "config.json").read_text())["rl"]["steps"] == 2

    # Same seed, same machine → same metrics (timings aside).
    r2 = _run(tmp_path, "--name", "b")
    assert r2.returncode == 0, r2.stderr
    strip = ("step_time_s", "forward_s", "backward_s", "rollout_s", "step_wall_s")
    rows = [[{k: v for k, v in json.loads(line).items() if k not in strip}
             for line in (tmp_path / name / "metrics.jsonl").open()] for name in ("a", "b")]
    assert rows[0] == rows[1]
    s2 = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert s2["eval_after"] == summary["eval_after"]


def test_existing_run_dir_is_not_overwritten_silently(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "keep.txt").write_text("x")
    r = _run(tmp_path, "--name", "c")
    assert r.returncode == 2 and "already exists" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("override, message", [
    ("nope=1", "config key nope: Extra inputs are not permitted"),
    ("rl.steps=-1", "config key rl.steps"),
    ("sft.optim.lr=fast", "config key sft.optim.lr"),
    ("rl.steps", "must look like key=value"),
])
def test_bad_config_is_a_clear_error(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, "quick", [override])


def test_bad_config_through_cli_is_one_line(tmp_path):
    r = _run(tmp_path, "--set", "agent.max_turnz=3")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "agent.max_turnz" in r.stderr
