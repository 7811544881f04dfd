"""[tracking]: which experiment trackers get the run's metrics, and where they keep them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from posttrain.config_base import StrictModel


class TrackingConfig(StrictModel):
    """Local stores under the run's directory by default: nothing reaches the network unless a
    key below names a server."""

    backends: list[Literal["wandb", "mlflow", "trackio"]] = Field(default_factory=list)
    project: str = "posttrain"             # W&B project, MLflow experiment, trackio project
    run_name: str | None = None            # None: the run's name
    wandb_mode: Literal["offline", "online"] = "offline"   # offline: RUN/wandb/, `wandb sync` uploads it
    mlflow_uri: str | None = None          # None: sqlite:///RUN/mlflow.db
    trackio_space: str | None = None       # a Hugging Face Space; None: the local store RUN/trackio/

    @field_validator("backends")
    @classmethod
    def _each_once(cls, backends: list[str]) -> list[str]:
        if len(set(backends)) < len(backends):
            raise ValueError(f"a backend is named twice: {backends}")
        return backends
