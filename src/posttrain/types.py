"""The small, serialisable objects that cross layers (see docs/ARCHITECTURE.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

KilledBy = Literal["none", "timeout", "memory", "pids", "output"]
EpisodeStatus = Literal[
    "ok", "agent_timeout", "verifier_timeout", "verifier_error", "infra_error", "context_overflow"
]


@dataclass
class ExecResult:
    """What one command in a sandbox did. Output is capped; `truncated` says if it was."""

    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    truncated: bool = False
    killed_by: KilledBy = "none"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Completion:
    """One sampled continuation: ids, logprobs of the processed distribution, why it stopped.

    routing (MoE models, the embedded engine): the experts each MoE layer chose for every token the
    engine ran, the prompt's and the reply's but its last, [position][moe layer][k]; None for a
    dense model or an engine that does not return it."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: Literal["stop", "length"]
    policy_version: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    routing: list[list[list[int]]] | None = None


@dataclass
class Turn:
    """One agent action and what the sandbox answered."""

    action: str
    kind: Literal["bash", "submit", "malformed", "unterminated"]
    observation: str
    exec_result: ExecResult | None = None


@dataclass
class Episode:
    """A whole attempt at a task, token-in/token-out.

    `tokens` is the full stream; `loss_mask[i]` is 1 where the model sampled tokens[i];
    `logprobs[i]` and `versions[i]` are the sampler's, meaningful where the mask is 1.
    `routing[i]` (MoE) is the engine's experts [moe layer][k] for tokens[i], for a prefix of
    tokens: the latest completion's, which covers all it was given.
    """

    task_id: str
    group_id: int
    tokens: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    reward: float = 0.0
    reward_details: dict[str, float] = field(default_factory=dict)
    status: EpisodeStatus = "ok"
    error: str = ""
    prompt_len: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    domain: str = ""        # the scheduler's domain of its task (per-domain metrics, advantages)
    routing: list[list[list[int]]] | None = None

    @property
    def tokens_out(self) -> int:
        return sum(self.loss_mask)

    @property
    def tokens_in(self) -> int:
        return len(self.tokens) - self.tokens_out

    def append(self, ids: list[int], *, sampled: bool, logprobs=None, version: int = 0) -> None:
        """Append prompt/observation ids (sampled=False) or model ids with their logprobs."""
        self.tokens.extend(ids)
        self.loss_mask.extend([1 if sampled else 0] * len(ids))
        self.logprobs.extend(logprobs if sampled else [0.0] * len(ids))
        self.versions.extend([version] * len(ids))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tokens_in"], d["tokens_out"] = self.tokens_in, self.tokens_out
        return d
