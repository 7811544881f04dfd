"""Settings of the agent turn loop."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from posttrain.agent.approval import ApprovalConfig
from posttrain.config_base import StrictModel
from posttrain.otel import OtelConfig
from posttrain.schedule.config import ContextConfig


class AgentConfig(StrictModel):
    max_turns: int = Field(6, ge=1)
    max_reply_tokens: int = Field(40, ge=1)
    observation_budget: int = Field(400, ge=16)     # characters of output shown per turn
    command_timeout_s: float = Field(10.0, gt=0)
    max_context: int = Field(2048, ge=64)           # tokens; longer episodes end as context_overflow
    sandbox_backend: str = "bwrap"
    harness: Literal["auto", "text", "tools"] = "auto"   # auto: tools where a task declares them
    program: list[str] | None = None   # an agent program (argv) run per episode (agent/byo/)
    workers: int = Field(8, ge=1)                   # concurrent sandbox commands
    context: ContextConfig = ContextConfig()        # the default of domains that set none
    retries: int = Field(3, ge=0)                   # engine or sandbox faults retried per call (agent/retry.py)
    retry_backoff_s: float = Field(0.5, ge=0)       # first wait; doubles each retry
    retry_backoff_max_s: float = Field(8.0, ge=0)
    otel: OtelConfig | None = None                  # [agent.otel]: a span per step (agent/traces.py)
    approval: ApprovalConfig = ApprovalConfig()     # [agent.approval]: off; eval --approve (agent/approval.py)

    @field_validator("program")
    @classmethod
    def _program_paths(cls, argv: list[str] | None) -> list[str] | None:
        """A relative path in the argv that names a file where the config is read (the user's
        working directory) becomes absolute: the program runs in a fresh directory per episode."""
        return argv and [str(Path(a).resolve()) if not Path(a).is_absolute() and Path(a).is_file()
                         else a for a in argv]

    @model_validator(mode="after")
    def _program_alone(self):
        if self.program is not None and not self.program:
            raise ValueError("agent.program must name a command (an argv list)")
        if self.program and self.approval.on:
            raise ValueError("agent.approval gates the built-in loop's commands, not an agent program's")
        return self

    @model_validator(mode="after")
    def _backoff_order(self):
        if self.retry_backoff_max_s < self.retry_backoff_s:
            raise ValueError("agent.retry_backoff_max_s must be >= agent.retry_backoff_s")
        return self
