"""A shortened quickstart, end to end through the real CLI, sandbox and model."""

import json
import subprocess
import sys

import pytest

from posttrain.errors import ConfigError
from posttrain.evals.stats import zero_spread_interval
from posttrain.evals.tdist import t_cdf, t_ppf
from posttrain.recipes.quickstart.config import load_config


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
        core = {"pass_at_1", "ci_low", "ci_high", "n_tasks", "k", "scores", "reward_mean", "turns_mean"}
        assert core <= set(summary[key])          # and what the agent did (agent/stats.py)
        assert all(k.startswith(("parse_", "tool_calls")) for k in set(summary[key]) - core)
        assert summary[key]["n_tasks"] == 6 and summary[key]["k"] == 2
    assert summary["seed"] == 0 and summary["wall_s"] > 0
    engine = summary["engine"]
    assert {k: engine[k] for k in ("dtype", "dtype_reason", "batch_invariant")} == {
        "dtype": "float32", "dtype_reason": "asked", "batch_invariant": False}
    assert engine["attention"] in ("vllm-cpu", "torch") and engine["gemm"] in ("mkl", "onednn", "vllm")
    assert summary["kernel_plan"]["dtype"] == "float32" and summary["kernel_plan"]["gemm"] == engine["gemm"]
    # RL - SFT, paired on the same held-out tasks and samples
    assert summary["paired_diff"] == pytest.approx(summary["eval_after"]["pass_at_1"]
                                                   - summary["eval_before"]["pass_at_1"])
    assert summary["paired_ci_low"] <= summary["paired_diff"] <= summary["paired_ci_high"]
    assert summary["paired_n_tasks"] == 6
    assert_paired_p_follows_its_ci(summary)
    for key in ("eval_before", "eval_after"):  # 6 tasks x 2 samples: pass@1 in twelfths, inside its CI
        e = summary[key]
        assert e["pass_at_1"] * 12 == pytest.approx(round(e["pass_at_1"] * 12), abs=1e-9)
        assert e["ci_low"] <= e["pass_at_1"] <= e["ci_high"]
    assert summary["cpu"]["model"] and summary["cpu"]["model"] in (run / "report.html").read_text()
    assert summary["device"]["device"] == "cpu" and summary["device"]["gpu"] is None  # auto, with no GPU here
    assert "RL &minus; SFT" in (run / "report.html").read_text() and "RL - SFT" in r.stdout
    assert (run / "checkpoint" / "model.safetensors").is_file()
    assert (run / "checkpoint" / "tokenizer.json").is_file()
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    assert "<img src=\"data:image/png;base64," in (run / "report.html").read_text()
    assert "<|assistant|>" in (run / "samples" / "rl-step-0000.txt").read_text()
    for name in ("eval_before", "eval_after", "rl-step-0000", "rl-step-0001"):
        assert "<|assistant|>" in (run / "samples" / f"{name}.txt").read_text(), name
    rows = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    # the quick preset's 20 SFT steps and 2 RL steps, one row each, in order
    assert [(r["phase"], r["step"]) for r in rows] == [("sft", i) for i in range(20)] + [("rl", 0), ("rl", 1)]
    rl_rows = [r for r in rows if r["phase"] == "rl"]
    # the pipeline's synchronous steps: each trains on its 2 groups of 4, version by version
    assert [(r["version"], r["groups"], r["episodes"]) for r in rl_rows] == [(1, 2, 8), (2, 2, 8)]
    assert all(r["status_ok"] == 1 and "zero_variance_groups" in r for r in rl_rows)
    # After each update the sampler must be on-policy again (no stale cached prefixes).
    assert all(r["mismatch_max_abs"] < 1e-4 for r in rows if r["phase"] == "rl")
    assert json.loads((run / "config.json").read_text())["rl"]["steps"] == 2

    # Same seed, same machine, the device named rather than "auto" → same metrics (timings aside).
    r2 = _run(tmp_path, "--name", "b", "--set", 'device="cpu"')
    assert r2.returncode == 0, r2.stderr
    def timing(key: str) -> bool:  # seconds, shares of wall time and rates
        return key.endswith(("_s", "_frac"))
    rows = [[{k: v for k, v in json.loads(line).items() if not timing(k)}
             for line in (tmp_path / name / "metrics.jsonl").open()] for name in ("a", "b")]
    assert rows[0] == rows[1]
    s2 = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert s2["eval_after"] == summary["eval_after"]


def assert_paired_p_follows_its_ci(s: dict):
    """The p-value is the paired t-test's whose 95% CI the summary reports: the CI's half-width is
    t(0.975, n-1) * SE, and p = 2 * (1 - T(|diff| / SE)); without spread, the sign test's."""
    n, diff, lo, hi = s["paired_n_tasks"], s["paired_diff"], s["paired_ci_low"], s["paired_ci_high"]
    if (lo, hi) == pytest.approx(zero_spread_interval(diff, n), abs=1e-12):
        assert s["paired_p"] == (1.0 if diff == 0 else min(1.0, 2 * 0.5**n))
        return
    assert diff - lo == pytest.approx(hi - diff)  # a t-interval is symmetric
    se = (hi - lo) / 2 / t_ppf(0.975, n - 1)
    assert s["paired_p"] == pytest.approx(2 * (1 - t_cdf(abs(diff) / se, n - 1)), abs=1e-9)


def test_the_paired_p_check_catches_a_p_that_is_not_its_cis():
    good = {"paired_n_tasks": 6, "paired_diff": 0.25, "paired_ci_low": 0.05, "paired_ci_high": 0.45}
    se = 0.2 / t_ppf(0.975, 5)
    assert_paired_p_follows_its_ci(good | {"paired_p": 2 * (1 - t_cdf(0.25 / se, 5))})
    with pytest.raises(AssertionError):
        assert_paired_p_follows_its_ci(good | {"paired_p": 0.5})
    flat = {"paired_n_tasks": 6, "paired_diff": 0.5}
    lo, hi = zero_spread_interval(0.5, 6)
    assert_paired_p_follows_its_ci(flat | {"paired_ci_low": lo, "paired_ci_high": hi, "paired_p": 2 * 0.5**6})


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


def test_a_gpu_asked_for_where_there_is_none_is_one_line(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    r = _run(tmp_path, "--set", 'device="cuda"')
    assert r.returncode == 2 and not (tmp_path / "quickstart").exists()
    assert r.stderr.strip().count("\n") == 0 and "torch sees no CUDA GPU" in r.stderr


def test_bad_config_through_cli_is_one_line(tmp_path):
    r = _run(tmp_path, "--set", "agent.max_turnz=3")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "agent.max_turnz" in r.stderr
