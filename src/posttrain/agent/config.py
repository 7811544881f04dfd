"""Settings of the agent turn loop."""

from __future__ import annotations

from pydantic import Field

from posttrain.config_base import StrictModel


class AgentConfig(StrictModel):
    max_turns: int = Field(6, ge=1)
    max_reply_tokens: int = Field(40, ge=1)
    observation_budget: int = Field(400, ge=16)     # characters of output shown per turn
    command_timeout_s: float = Field(10.0, gt=0)
    max_context: int = Field(2048, ge=64)           # tokens; longer episodes end as context_overflow
    sandbox_backend: str = "bwrap"
    workers: int = Field(8, ge=1)                   # concurrent sandbox commands
