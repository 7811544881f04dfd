"""Settings of the agent turn loop, and of its context policy (agent/context.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from posttrain.agent.approval import ApprovalConfig
from posttrain.config_base import StrictModel
from posttrain.otel import OtelConfig


class ContextConfig(StrictModel):
    """What of an episode's history goes back into the prompt (agent/context.py)."""

    kind: Literal["keep_all", "last_k", "truncate", "summarise"] = "keep_all"
    k: int = Field(4, ge=1)                       # last_k, summarise: recent turns kept verbatim
    max_chars: int = Field(400, ge=16)            # truncate: characters kept of a long observation
    tail_chars: int = Field(200, ge=0)            # truncate: how many of them from its end
    summary_engine: str = "policy"                # summarise: "policy", or an OpenAI-compatible base URL
    summary_tokens: int = Field(64, ge=1)         # summarise: the summary's token budget

    @model_validator(mode="after")
    def _tail_fits(self):
        if self.tail_chars >= self.max_chars:
            raise ValueError(f"context.tail_chars ({self.tail_chars}) must be below max_chars ({self.max_chars})")
        if self.summary_engine != "policy" and not self.summary_engine.startswith(("http://", "https://")):
            raise ValueError('context.summary_engine is "policy" or an http(s) base URL, '
                             f"got {self.summary_engine!r}")
        return self

    def label(self) -> str:
        """The policy and the knobs it reads, as `kind:knob=value,...` (parse() reads it back):
        what an eval job's conditions record."""
        knobs = ",".join(f"{n}={getattr(self, n)}" for n in _KNOBS[self.kind])
        return f"{self.kind}:{knobs}" if knobs else self.kind

    @classmethod
    def parse(cls, spec: str) -> ContextConfig:
        """`last_k:k=3`, `truncate:max_chars=800,tail_chars=300`, `keep_all`: a ContextConfig."""
        kind, _, knobs = spec.partition(":")
        pairs = [kv.split("=", 1) for kv in knobs.split(",") if kv]
        if any(len(p) != 2 for p in pairs):
            raise ValueError(f"context {spec!r}: knobs are KEY=VALUE, comma-separated")
        return cls(kind=kind, **dict(pairs))


_KNOBS = {"keep_all": (), "last_k": ("k",), "truncate": ("max_chars", "tail_chars"),
          "summarise": ("k", "summary_engine", "summary_tokens")}


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
