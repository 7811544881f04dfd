"""`posttrain rl` over two sandbox domains end to end (slow: real sandboxes and SFT): every
batch holds the configured shares, per-domain metrics are written, SIGKILL and --resume
train no group twice."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow


def test_two_domain_run_holds_its_shares_across_a_sigkill(tmp_path):
    args = [sys.executable, "-m", "posttrain.cli", "rl", "examples/rl_domains.toml",
            "--set", f'runs_dir="{tmp_path}"', "--set", "threads=1", "--set", "rollout.steps=4",
            "--set", "rollout.checkpoint_every=1", "--set", "tasks.n_eval=0",
            "--set", "policy.sft_steps=30", "--set", "rollout.filter_zero_variance=false"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run = tmp_path / "rl-domains"
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
    assert [(row["d/files/groups"], row["d/text/groups"]) for row in rows] == [(3.0, 1.0)] * 4
    events = [json.loads(x) for x in (run / "events.jsonl").open()]
    trained = [u for e in events if e["event"] == "train" for u in e["uids"]]
    assert len(trained) == len(set(trained)) == 16
