"""MLflow: a run in the SQLite store RUN/mlflow.db by default (`mlflow ui --backend-store-uri
sqlite:///RUN/mlflow.db`), or in the store or server that tracking.mlflow_uri names."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from posttrain.train.tracking.base import leaves, numbers
from posttrain.train.tracking.config import TrackingConfig

PARAM_CHARS = 6000   # MLflow's longest param value
NOT_IN_A_KEY = re.compile(r"[^\w\-. :/]")   # what MLflow refuses in a param's name


class MlflowTracker:
    def __init__(self, client, run_id: str):
        self._client = client
        self._run_id = run_id

    def log(self, phase: str, step: int, scalars: dict[str, float]) -> None:
        self._log_metrics({f"{phase}/{k}": v for k, v in scalars.items()}, step)

    def finish(self, summary: dict | None) -> None:
        if summary is not None:
            self._log_metrics({f"summary/{k}": v for k, v in numbers(summary).items()}, 0)
        self._client.set_terminated(self._run_id, "FINISHED" if summary is not None else "FAILED")

    def _log_metrics(self, values: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        ms = int(time.time() * 1000)
        self._client.log_batch(self._run_id, metrics=[Metric(k, v, ms, step) for k, v in values.items()])


def _param(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text[:PARAM_CHARS]


def open_run(cfg: TrackingConfig, run_dir: Path, config: dict, name: str) -> MlflowTracker:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")   # read when mlflow is imported
    from mlflow import MlflowClient
    from mlflow.entities import Param

    client = MlflowClient(tracking_uri=cfg.mlflow_uri or f"sqlite:///{run_dir.resolve() / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(cfg.project)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(cfg.project)
    run_id = client.create_run(experiment_id, run_name=name).info.run_id
    client.log_batch(run_id, params=[Param(NOT_IN_A_KEY.sub("_", k), _param(v)) for k, v in leaves(config).items()])
    return MlflowTracker(client, run_id)
