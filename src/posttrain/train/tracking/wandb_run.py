"""Weights & Biases: an offline run in RUN/wandb/ by default (`wandb sync RUN/wandb/offline-run-*`
uploads it later), or an online one with tracking.wandb_mode = "online"."""

from __future__ import annotations

import os
from pathlib import Path

from posttrain.train.tracking.config import TrackingConfig


class WandbTracker:
    def __init__(self, run):
        self._run = run
        self._phases: set[str] = set()

    def log(self, phase: str, step: int, scalars: dict[str, float]) -> None:
        # Each phase counts its own steps (the quickstart's SFT, then RL from 0 again), and W&B's
        # own step only rises: so `phase/step` is the x-axis of `phase/*`.
        if phase not in self._phases:
            self._run.define_metric(f"{phase}/step")
            self._run.define_metric(f"{phase}/*", step_metric=f"{phase}/step")
            self._phases.add(phase)
        self._run.log({f"{phase}/step": step, **{f"{phase}/{k}": v for k, v in scalars.items()}})

    def finish(self, summary: dict | None) -> None:
        if summary is not None:
            self._run.summary.update(summary)
        self._run.finish(exit_code=0 if summary is not None else 1)


def open_run(cfg: TrackingConfig, run_dir: Path, config: dict, name: str) -> WandbTracker:
    if cfg.wandb_mode == "offline":
        os.environ.setdefault("WANDB_ERROR_REPORTING", "false")   # wandb-core's crash reports
    import wandb

    settings = wandb.Settings(console="off", silent=True)   # stdout stays the progress bars'
    run = wandb.init(project=cfg.project, name=name, config=config, dir=run_dir, mode=cfg.wandb_mode,
                     settings=settings)
    return WandbTracker(run)
