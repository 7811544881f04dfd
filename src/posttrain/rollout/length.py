"""A length curriculum: the reply and context budgets rise with the policy version.

`[[rollout.length_curriculum]]` stages, each `from_step` on: a wave sampled by policy version v
uses the last stage with from_step <= v; before the first stage, and in the held-out evals, the
configured budgets apply (agent.max_reply_tokens / agent.max_context, or tasks.max_tokens for
single-turn tasks). Those budgets are the ceiling: stages only raise towards them.
"""

from __future__ import annotations

from pydantic import Field

from posttrain.config_base import StrictModel


class LengthStage(StrictModel):
    from_step: int = Field(ge=0)                        # the first policy version of the stage
    max_reply_tokens: int | None = Field(None, ge=1)    # None: the configured budget
    max_context: int | None = Field(None, ge=64)


def check_curriculum(stages: list[LengthStage]) -> None:
    """Stages in order of from_step, and no budget lower than the stage's before it."""
    for before, stage in zip(stages, stages[1:]):
        if stage.from_step <= before.from_step:
            raise ValueError(f"length_curriculum: from_step {stage.from_step} must come after {before.from_step}")
        for knob in ("max_reply_tokens", "max_context"):
            old, new = getattr(before, knob), getattr(stage, knob)
            if old is not None and new is not None and new < old:
                raise ValueError(f"length_curriculum: {knob} falls from {old} to {new} at step {stage.from_step}")


def stage_at(stages: list[LengthStage], version: int) -> LengthStage | None:
    """The stage that policy version `version` samples under, or None (the configured budgets)."""
    current = None
    for stage in stages:
        if stage.from_step <= version:
            current = stage
    return current


def budgets_at(stages: list[LengthStage], version: int, reply: int, context: int) -> tuple[int, int]:
    """(reply tokens, context tokens) at `version`, given the configured budgets (the ceiling)."""
    stage = stage_at(stages, version)
    if stage is None:
        return reply, context
    return min(stage.max_reply_tokens or reply, reply), min(stage.max_context or context, context)


def stage_metrics(stages: list[LengthStage], version: int) -> dict[str, float]:
    """The budgets a stage sets at `version`, as step metrics (none before the first stage)."""
    stage = stage_at(stages, version)
    if stage is None:
        return {}
    return {f"length_{k}": float(v) for k in ("max_reply_tokens", "max_context")
            if (v := getattr(stage, k)) is not None}
