"""RolloutConfig: the knobs of the two loops. Checked when built."""

from __future__ import annotations

from pydantic import Field, model_validator

from posttrain.config_base import StrictModel
from posttrain.rollout.length import LengthStage, check_curriculum

# Keys that moved to another section: an old config that sets one is told where it went.
MOVED = {"engine_process": 'engines.kind = "process"', "pin_cores": "engines.pin_cores"}


class RolloutConfig(StrictModel):
    steps: int = Field(10, ge=1)                 # optimizer steps (policy versions) to train
    groups_per_step: int = Field(4, ge=1)        # B: groups in one training batch
    group_size: int = Field(4, ge=2)             # G: attempts per task
    max_staleness: int = Field(1, ge=0)          # versions a token may lag; 0 = synchronous
    overprovision: int = Field(1, ge=0)          # extra groups in flight for the long tail
    # > 0: the extra groups are hedges, one per group in flight longer than this many times
    # its domain's median group time (rollout/hedge.py); 0: always in flight
    hedge_after: float = Field(0.0, ge=0)
    # Partial rollouts (APRIL): a group may be trained up to max_staleness + this many
    # versions old. Stragglers a batch went without, and the groups they push back, are then
    # trained later (their sampler logprobs kept for TIS) instead of dropped. Issuing still
    # follows max_staleness. 0: anything older than max_staleness is dropped.
    carry_staleness: int = Field(0, ge=0)
    groups_per_wave: int = Field(2, ge=1)        # groups one rollout worker runs in lockstep
    workers: int = Field(2, ge=1)                # concurrent rollout workers (async only)
    max_refill_rounds: int = Field(4, ge=1)      # waves of refills before a step goes short
    filter_zero_variance: bool = True            # drop groups whose rewards are all equal, refill
    infra_retries: int = Field(2, ge=0)          # re-runs of a group lost wholly to infra errors
    episode_timeout_s: float | None = Field(None, gt=0)  # per-episode cap on the agent phase
    checkpoint_every: int = Field(0, ge=0)       # steps between checkpoints; 0 = only at the end
    temperature: float = Field(1.0, gt=0)
    record_batches: bool = False                 # write each trained batch to RUN/batches (replay)
    # multi-turn: checkpoint each episode after every turn (RUN/episodes); --resume continues them
    episode_checkpoints: bool = False
    # [[rollout.length_curriculum]]: reply/context budgets that rise with the step (rollout/length.py)
    length_curriculum: list[LengthStage] = []

    @model_validator(mode="after")
    def _curriculum_rises(self):
        check_curriculum(self.length_curriculum)
        return self

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data):
        for old, new in MOVED.items():
            if isinstance(data, dict) and old in data:
                raise ValueError(f"rollout.{old} is now {new}")
        return data
