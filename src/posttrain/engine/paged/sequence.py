"""Sequence: one request's tokens, KV bookkeeping and sampling state inside the engine."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import torch

from posttrain.engine.base import SamplingParams

_ids = itertools.count()


@dataclass(eq=False)
class Sequence:
    """Tokens = prompt + output. KV holds tokens[:num_computed]; block_table maps blocks to KV.

    Invariant while decoding: num_computed == len(tokens) - 1 (the last token is fed next).
    """

    tokens: list[int]
    params: SamplingParams
    generator: torch.Generator
    num_prompt: int = 0
    num_computed: int = 0
    num_cached: int = 0  # prompt tokens found in the prefix cache (not recomputed)
    block_table: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)  # chain hashes of full computed blocks
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[dict[int, float]] = field(default_factory=list)  # per output token, if asked
    finish_reason: str | None = None
    children: list["Sequence"] = field(default_factory=list)  # group members forked after prefill
    spec_k: int = 0  # adaptive draft length (0: the engine's spec_tokens)
    seq_id: int = field(default_factory=lambda: next(_ids))
    arrival: float = field(default_factory=time.perf_counter)
    first_token_time: float | None = None
    routing: list | None = None  # MoE: experts [position][moe layer][k] of tokens[:num_computed], when finished

    def __post_init__(self):
        if not self.num_prompt:
            self.num_prompt = len(self.tokens)

    @property
    def output(self) -> list[int]:
        return self.tokens[self.num_prompt :]

    @property
    def num_to_compute(self) -> int:
        return len(self.tokens) - self.num_computed

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def reset_for_recompute(self) -> None:
        """Preempted: KV is dropped; prompt and output so far will be prefilled again."""
        self.block_table = []
        self.block_hashes = []
        self.num_computed = 0


def validate_prompts(prompts: list[list[int]], vocab_size: int, max_len: int | None, max_tokens: int):
    """Raise ValueError with a clear message for empty, out-of-vocab or too-long prompts."""
    if not prompts:
        raise ValueError("generate needs at least one prompt")
    for i, p in enumerate(prompts):
        if len(p) == 0:
            raise ValueError(f"prompt {i} is empty")
        if min(p) < 0 or max(p) >= vocab_size:
            raise ValueError(f"prompt {i} has token ids outside [0, {vocab_size})")
        if max_len is not None and len(p) >= max_len:
            raise ValueError(f"prompt {i} has {len(p)} tokens; the context is {max_len}")
