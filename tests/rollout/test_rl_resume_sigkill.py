"""Kill a synchronous run with SIGKILL after a checkpoint, resume it, and get exactly the
metrics of a run that was never interrupted (nothing lost, nothing trained twice)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from posttrain.errors import PosttrainError
from posttrain.recipes.rl.run import run_rl
from posttrain.recipes.rl.config import load_rl_config

SETTINGS = ["threads=1", 'tasks.kind="copy"', "tasks.n_train=6", "tasks.n_eval=0", "tasks.max_tokens=4",
            "policy.sft_steps=0", "policy.vocab_size=300", "rollout.steps=4",
            "rollout.max_staleness=0", "rollout.groups_per_step=2", "rollout.group_size=3",
            "rollout.checkpoint_every=1", "rollout.overprovision=1"]


def _metrics(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    return [{k: v for k, v in r.items() if not (k.endswith("_s") or "idle" in k or "busy" in k)}
            for r in rows]


def test_sigkill_then_resume_gives_identical_metrics(tmp_path):
    base = [f'runs_dir="{tmp_path}"', *SETTINGS]
    run_rl(load_rl_config(None, base + ['name="whole"']))
    cmd = [sys.executable, "-m", "posttrain.cli", "rl", *sum((["--set", s] for s in base), []),
           "--set", 'name="killed"']
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    metrics = tmp_path / "killed" / "metrics.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if metrics.is_file() and len(metrics.read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = len(metrics.read_text().splitlines())
    assert killed_at < 4
    run_rl(load_rl_config(None, base + ['name="killed"']), resume=True)
    assert _metrics(tmp_path / "killed") == _metrics(tmp_path / "whole")
    s = json.loads((tmp_path / "killed" / "summary.json").read_text())
    assert s["steps"] == 4 and s["trajectories"] == 4 * 2 * 3


def test_resume_without_checkpoint_and_overwrite_guard(tmp_path):
    cfg = load_rl_config(None, [f'runs_dir="{tmp_path}"', 'name="none"', *SETTINGS])
    with pytest.raises(PosttrainError, match="no checkpoint"):
        run_rl(cfg, resume=True)
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "x").write_text("x")
    with pytest.raises(PosttrainError, match="already exists"):
        run_rl(cfg)
