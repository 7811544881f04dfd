"""MetricsLog's rows reach a tracker phase by phase: the quickstart's SFT steps, then its RL
steps counted from 0 again, stay two series with their own steps (W&B's own step only rises)."""

import json

import pytest
from tracker_stores import mlflow_run, mlflow_series, wandb_run

from posttrain.train.metrics import MetricsLog
from posttrain.train.tracking.config import TrackingConfig
from posttrain.train.tracking.fanout import Trackers

PHASES = {"sft": 3, "rl": 2}


def _log_two_phases(run_dir, backend: str) -> list[dict]:
    with Trackers(TrackingConfig(backends=[backend]), run_dir, {"seed": 7}, "phases") as trackers:
        log = MetricsLog(run_dir, trackers)
        for phase, steps in PHASES.items():
            for step in range(steps):
                log.log(phase, step, {"loss": 1 / (step + 1) + (phase == "rl"), "tokens": 5 * step, "note": "x"})
        log.close()
        trackers.finish({"steps": 2, "eval": {"pass_at_1": 0.5}})
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]


def _series(rows: list[dict], phase: str, key: str) -> list[tuple[int, float]]:
    return [(r["step"], float(r[key])) for r in rows if r["phase"] == phase]


@pytest.mark.needs("wandb")
def test_wandb_keeps_each_phase_on_its_own_steps(tmp_path):
    rows = _log_two_phases(tmp_path, "wandb")
    stored = wandb_run(tmp_path)
    for phase in PHASES:
        for key in ("loss", "tokens"):
            logged = [(h[f"{phase}/step"], h[f"{phase}/{key}"]) for h in stored["history"] if f"{phase}/step" in h]
            assert logged == _series(rows, phase, key)
    assert not any("note" in k for h in stored["history"] for k in h)       # scalars only
    assert stored["config"]["seed"] == 7
    assert stored["summary"]["steps"] == 2 and stored["summary"]["eval"] == {"pass_at_1": 0.5}


@pytest.mark.needs("mlflow")
def test_mlflow_keeps_each_phase_on_its_own_steps(tmp_path):
    rows = _log_two_phases(tmp_path, "mlflow")
    client, stored = mlflow_run(f"sqlite:///{tmp_path / 'mlflow.db'}")
    for phase in PHASES:
        for key in ("loss", "tokens"):
            assert mlflow_series(client, stored, f"{phase}/{key}") == _series(rows, phase, key)
    assert sorted(stored.data.metrics) == ["rl/loss", "rl/tokens", "sft/loss", "sft/tokens",
                                           "summary/eval.pass_at_1", "summary/steps"]
    assert stored.data.params == {"seed": "7"} and stored.info.status == "FINISHED"
