"""The generation interface that every engine (embedded or remote) implements."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field

from posttrain.types import Completion


@dataclass
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 64
    stop_token_ids: list[int] = field(default_factory=list)
    seed: int | None = None
    top_k: int = 0  # 0 = off; otherwise keep the k most likely tokens
    stop: list[str] = field(default_factory=list)  # stop strings (need a tokenizer)
    top_logprobs: int = 0  # also record the k most likely tokens at each sampled position
    # Row r of a seeded call samples from stream seed * 1_000_003 + seed_rows[r] (None: + r).
    # A caller that names each prompt's stream gets samples that do not depend on which
    # prompts share the call (an episode resumed in another batch draws what it drew before).
    seed_rows: list[int] | None = None

    def __post_init__(self):
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        if self.top_k < 0:
            raise ValueError("top_k must be >= 0 (0 = off)")
        if self.top_logprobs < 0:
            raise ValueError("top_logprobs must be >= 0")
        if self.seed_rows is not None and any(r < 0 for r in self.seed_rows):
            raise ValueError("seed_rows must be >= 0")

    def stream(self, row: int) -> int:
        """The stream number row `row` of this call samples from (with the seed)."""
        return row if self.seed_rows is None else self.seed_rows[row]


class Engine(abc.ABC):
    """Token-in/token-out generation with per-token logprobs and a policy version.

    The rollout layer (rollout/weights.py) asks an engine only what it declares here."""

    policy_version: int = 0
    # Orders weight updates against its own calls, so callers may generate side by side.
    concurrent: bool = False
    # generate is thread-safe and concurrent callers' requests share its steps (batch together).
    shares_steps: bool = False
    # Takes new weights without waiting for a generate call in flight.
    updates_while_generating: bool = False

    @abc.abstractmethod
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """One completion per prompt (a GRPO group passes the same prompt G times)."""

    def update_weights(self, state_dict: dict, version: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not accept weight updates")

    def share_weights(self, model, version: int) -> bool:
        """Take `model`'s weights as `version` without a copy, where this engine generates
        from `model` itself. False: nothing was done, copy them with `update_weights`."""
        return False
