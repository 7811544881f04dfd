"""A short `posttrain rl` run logged to W&B, MLflow and trackio at once, each offline in the
run's directory: every metrics.jsonl row reaches each store with its step and values, the
config once, and the summary at the end."""

import json
import math
import subprocess
import sys

import pytest
from tracker_stores import mlflow_run, mlflow_series, trackio_run, wandb_run

pytestmark = pytest.mark.needs("wandb", "mlflow", "trackio")

RUN = ["threads=1", 'tasks.kind="copy"', "tasks.n_train=4", "tasks.n_eval=2", "tasks.max_tokens=4",
       "policy.sft_steps=0", "policy.vocab_size=300", "rollout.steps=3", "rollout.max_staleness=0",
       "rollout.groups_per_step=1", "rollout.group_size=2", "rollout.overprovision=1",
       "rollout.filter_zero_variance=false", 'tracking.backends=["wandb", "mlflow", "trackio"]']


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The run, in a Python of its own: trackio fixes its store's directory when first imported."""
    root = tmp_path_factory.mktemp("tracked")
    sets = [arg for s in [f'runs_dir="{root}"', 'name="tracked"', *RUN] for arg in ("--set", s)]
    r = subprocess.run([sys.executable, "-m", "posttrain.cli", "rl", *sets], capture_output=True, text=True,
                       timeout=600, check=False)
    assert r.returncode == 0, r.stderr
    assert "tracking:" not in r.stderr          # no tracker failed
    run_dir = root / "tracked"
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    return run_dir, [row for row in rows if row["phase"] == "rl"]


def _scalars(row: dict) -> dict[str, float]:
    return {k: float(v) for k, v in row.items() if k not in ("phase", "step") and isinstance(v, (int, float))}


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def test_wandb_holds_every_row_the_config_and_the_summary(run):
    run_dir, rows = run
    stored = wandb_run(run_dir)
    history = [h for h in stored["history"] if "rl/step" in h]
    assert [h["rl/step"] for h in history] == [r["step"] for r in rows] == [0, 1, 2]
    for h, row in zip(history, rows, strict=True):
        assert {k: h[f"rl/{k}"] for k in _scalars(row)} == _scalars(row)
    assert stored["config"]["rollout"]["steps"] == 3 and stored["config"]["name"] == "tracked"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert stored["summary"]["steps"] == summary["steps"] == 3
    assert stored["summary"]["eval_after"] == summary["eval_after"]


def test_mlflow_holds_every_row_the_config_and_the_summary(run):
    run_dir, rows = run
    client, stored = mlflow_run(f"sqlite:///{run_dir / 'mlflow.db'}")
    assert stored.info.run_name == "tracked" and stored.info.status == "FINISHED"
    for key in _scalars(rows[0]):
        assert all(_same(a, b) for a, b in zip(
            [v for _, v in mlflow_series(client, stored, f"rl/{key}")], [_scalars(r)[key] for r in rows], strict=True))
        assert [s for s, _ in mlflow_series(client, stored, f"rl/{key}")] == [0, 1, 2]
    assert stored.data.params["rollout.steps"] == "3" and stored.data.params["tasks.kind"] == "copy"
    assert stored.data.metrics["summary/steps"] == 3


def test_trackio_holds_every_row_the_config_and_the_summary(run):
    run_dir, rows = run
    stored = trackio_run(run_dir / "trackio", "tracked")
    logged = [log for log in stored["logs"] if "rl/reward_mean" in log]
    assert [log["step"] for log in logged] == [0, 1, 2]
    for log, row in zip(logged, rows, strict=True):
        assert all(_same(float(log[f"rl/{k}"]), v) for k, v in _scalars(row).items())
    assert stored["config"]["rollout"]["steps"] == 3
    (summary,) = [log for log in stored["logs"] if "summary/steps" in log]
    assert summary["summary/steps"] == 3 and summary["step"] == 3
