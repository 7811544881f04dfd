"""How a domain is configured (one `[[domains]]` table each) and the scheduler's knobs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from posttrain.config_base import StrictModel


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
    def parse(cls, spec: str) -> "ContextConfig":
        """`last_k:k=3`, `truncate:max_chars=800,tail_chars=300`, `keep_all`: a ContextConfig."""
        kind, _, knobs = spec.partition(":")
        pairs = [kv.split("=", 1) for kv in knobs.split(",") if kv]
        if any(len(p) != 2 for p in pairs):
            raise ValueError(f"context {spec!r}: knobs are KEY=VALUE, comma-separated")
        return cls(kind=kind, **dict(pairs))


_KNOBS = {"keep_all": (), "last_k": ("k",), "truncate": ("max_chars", "tail_chars"),
          "summarise": ("k", "summary_engine", "summary_tokens")}


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
    context: ContextConfig | None = None          # None: agent.context


class ScheduleConfig(StrictModel):
    curriculum: bool = False            # weight tasks by expected group signal (schedule/curriculum.py)
    decay: float = Field(0.8, gt=0, le=1)
    floor: float = Field(0.05, gt=0, le=1)
    prior_strength: float = Field(4.0, ge=0)
    quarantine_after: int = Field(2, ge=1)
    infra_retries: int = Field(2, ge=0)  # a group lost wholly to infra errors is re-run this often
