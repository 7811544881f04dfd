"""SIGTERM (preemption) mid-run: the step in progress finishes, a checkpoint is written, the
process exits 143, and --resume then gives exactly an uninterrupted run's metrics."""

import json
import os
import signal
import subprocess
import sys
import time

from posttrain.recipes.rl.run import run_rl
from posttrain.recipes.rl.config import load_rl_config
from posttrain.train.checkpoint import latest_checkpoint

SETTINGS = ["threads=1", 'tasks.kind="copy"', "tasks.n_train=6", "tasks.n_eval=0", "tasks.max_tokens=4",
            "policy.sft_steps=0", "policy.vocab_size=300", "rollout.steps=8", "rollout.max_staleness=0",
            "rollout.groups_per_step=2", "rollout.group_size=3", "rollout.checkpoint_every=100"]


def metrics(run_dir):
    return [{k: v for k, v in json.loads(line).items() if not (k.endswith("_s") or "idle" in k or "busy" in k)}
            for line in (run_dir / "metrics.jsonl").open()]


def test_sigterm_checkpoints_within_one_step_exits_143_and_resumes_exactly(tmp_path):
    base = [f'runs_dir="{tmp_path}"', *SETTINGS]
    run_rl(load_rl_config(None, base + ['name="whole"']))
    cmd = [sys.executable, "-m", "posttrain.cli", "rl", *sum((["--set", s] for s in base), []),
           "--set", 'name="term"']
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = tmp_path / "term" / "metrics.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if lines.is_file() and len(lines.read_text().splitlines()) >= 2:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before SIGTERM"
    done = len(lines.read_text().splitlines())
    os.kill(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    assert "SIGTERM: checkpointed" in out
    step = int(latest_checkpoint(tmp_path / "term").name.split("-")[1])
    assert done <= step <= done + 1 < 8  # the step in progress at most
    run_rl(load_rl_config(None, base + ['name="term"']), resume=True)
    assert metrics(tmp_path / "term") == metrics(tmp_path / "whole")
