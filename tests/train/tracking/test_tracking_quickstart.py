"""The quickstart's metrics reach a tracker too: its quick preset logged to MLflow offline, the
SFT and RL rows read back with MLflow's own client."""

import json
import subprocess
import sys

import pytest
from tracker_stores import mlflow_run, mlflow_series

pytestmark = pytest.mark.needs("mlflow")


def test_quickstart_rows_reach_mlflow(tmp_path):
    cmd = [sys.executable, "-m", "posttrain.cli", "quickstart", "--preset", "quick", "--name", "q",
           "--set", f'runs_dir="{tmp_path}"', "--set", 'tracking.backends=["mlflow"]']
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr
    run_dir = tmp_path / "q"
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    client, run = mlflow_run(f"sqlite:///{run_dir / 'mlflow.db'}")
    for phase, key in (("sft", "loss"), ("rl", "reward_mean")):
        logged = [(r["step"], r[key]) for r in rows if r["phase"] == phase]
        assert mlflow_series(client, run, f"{phase}/{key}") == logged, phase
    assert run.data.params and run.info.status == "FINISHED"
