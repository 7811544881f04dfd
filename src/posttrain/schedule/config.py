"""How a domain is configured (one `[[domains]]` table each) and the scheduler's knobs."""

from __future__ import annotations

from pydantic import Field

from posttrain.config_base import StrictModel


class DomainConfig(StrictModel):
    name: str = Field(min_length=1)
    source: str                                   # a task directory, or a built-in suite name
    share: float = Field(1.0, ge=0)               # of every training batch (normalised)
    priority: int = 0                             # higher issues first when slots are contested
    n_train: int = Field(48, ge=1)                # tasks a built-in suite generates
    options: dict = {}                            # keyword arguments of the suite's generate()
    manifest: str | None = None                   # validation manifest of the source's tasks
    include: list[str] = ["ok"]                   # manifest statuses trained on
    sandbox_slots: int | None = Field(None, ge=1)     # episodes of this domain running at once
    tokens_per_s: float | None = Field(None, gt=0)   # engine tokens per second it may use
    episode_timeout_s: float | None = Field(None, gt=0)  # wall seconds per episode (agent phase)


class ScheduleConfig(StrictModel):
    curriculum: bool = False            # weight tasks by expected group signal (schedule/curriculum.py)
    decay: float = Field(0.8, gt=0, le=1)
    floor: float = Field(0.05, gt=0, le=1)
    prior_strength: float = Field(4.0, ge=0)
    quarantine_after: int = Field(2, ge=1)
    infra_retries: int = Field(2, ge=0)  # a group lost wholly to infra errors is re-run this often
