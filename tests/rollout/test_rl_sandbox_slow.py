"""`posttrain rl` end to end on sandbox tasks, asynchronous: SIGKILL mid-run, --resume, and
the resumed run finishes with no group trained twice (slow: real sandboxes and SFT)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow


def test_async_sandbox_run_survives_sigkill(tmp_path):
    args = [sys.executable, "-m", "posttrain.cli", "rl", "examples/rl.toml",
            "--set", f'runs_dir="{tmp_path}"', "--set", "threads=1", "--set", "rollout.steps=4",
            "--set", "rollout.checkpoint_every=1", "--set", "tasks.n_train=12",
            "--set", "tasks.n_eval=0", "--set", "policy.sft_steps=30",
            # groups whose rewards tie still train (zero advantage): the test is about resume,
            # and a run whose every step is skipped exits 2 by design
            "--set", "rollout.filter_zero_variance=false"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run = tmp_path / "rl"
    deadline = time.time() + 900
    while time.time() < deadline and proc.poll() is None:
        if (run / "metrics.jsonl").is_file() and len((run / "metrics.jsonl").read_text().splitlines()) >= 2:
            break
        time.sleep(0.1)
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    r = subprocess.run(args + ["--resume"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [json.loads(x) for x in (run / "metrics.jsonl").open()]
    assert [row["step"] for row in rows] == [0, 1, 2, 3]
    events = [json.loads(x) for x in (run / "events.jsonl").open()]
    trained = [u for e in events if e["event"] == "train" for u in e["uids"]]
    assert len(trained) == len(set(trained))
    assert json.loads((run / "summary.json").read_text())["steps"] == 4
