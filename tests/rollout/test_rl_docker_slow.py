"""A short `posttrain rl` on docker tasks (images built from the tasks' Dockerfiles by a
real engine): the step's groups all run to a verdict in containers (slow). The policy is an
untrained tiny model, so its groups have zero reward variance and are filtered; training
on sandbox tasks is tested in test_rl_sandbox_slow.py."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_short_rl_run_on_docker_tasks(tmp_path, docker_tb1_tasks, docker_task_env):
    args = [sys.executable, "-m", "posttrain.cli", "rl", "examples/rl.toml",
            "--set", f'runs_dir="{tmp_path}"', "--set", "threads=1",
            "--set", 'tasks.kind="dir"', "--set", f'tasks.path="{docker_tb1_tasks}"',
            "--set", "tasks.n_train=3", "--set", "tasks.n_eval=0", "--set", "policy.sft_steps=0",
            "--set", 'agent.sandbox_backend="docker"', "--set", "agent.max_turns=2",
            "--set", "rollout.steps=1", "--set", "rollout.groups_per_step=1",
            "--set", "rollout.group_size=2", "--set", "rollout.workers=2",
            "--set", "rollout.max_staleness=0",
            # an untrained model scores every group alike; train on them anyway (zero advantage),
            # else every step is skipped and the run exits 2 by design
            "--set", "rollout.filter_zero_variance=false"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=900,
                       env={**os.environ, **docker_task_env})
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(x) for x in (tmp_path / "rl" / "metrics.jsonl").open()]
    assert [row["step"] for row in rows] == [0]
    assert rows[0]["finished_ok_total"] >= 2       # episodes that reached the verifier
