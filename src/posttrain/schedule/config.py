"""The scheduler's knobs: the `[schedule]` section (curriculum, quarantine, infra retries)."""

from __future__ import annotations

from pydantic import Field

from posttrain.config_base import StrictModel


class ScheduleConfig(StrictModel):
    curriculum: bool = False            # weight tasks by expected group signal (schedule/curriculum.py)
    decay: float = Field(0.8, gt=0, le=1)
    floor: float = Field(0.05, gt=0, le=1)
    prior_strength: float = Field(4.0, ge=0)
    quarantine_after: int = Field(2, ge=1)
    infra_retries: int = Field(2, ge=0)  # a group lost wholly to infra errors is re-run this often
