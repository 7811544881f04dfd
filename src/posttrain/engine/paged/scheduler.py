"""Scheduler: continuous batching with chunked prefill and preemption by recompute.

Every step: running sequences that decode get their token(s) first, then unfinished prefills
get chunks, then waiting sequences are admitted, all under one token budget. A finished
sequence leaves at once, so its slot refills on the next step. When KV blocks run out, the
newest running sequence is preempted: its blocks are freed and it is prefilled again later
(its sampled tokens and RNG state are kept, so its output is unchanged).
"""

from __future__ import annotations

from collections import deque

from posttrain.engine.paged.block_manager import BlockManager
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.sequence import Sequence


class Scheduler:
    def __init__(self, config: EngineConfig, blocks: BlockManager):
        self.config = config
        self.blocks = blocks
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preempted = 0

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self, lookahead: int = 0) -> tuple[list[tuple[Sequence, int]], list[tuple[int, int]]]:
        """Pick (sequence, tokens to compute) pairs for one step; lookahead = draft tokens.

        Returns the picks and the copy-on-write block copies the KV cache must do first.
        """
        budget = self.config.max_num_batched_tokens
        picked: list[tuple[Sequence, int]] = []
        copies: list[tuple[int, int]] = []
        for seq in list(self.running):  # decodes, oldest first; victims come from the tail
            if seq.num_to_compute != 1 or seq not in self.running or budget <= 0:
                continue
            n = min(1 + lookahead, budget)
            if self._make_room(seq, n):
                copies += self.blocks.append(seq, n)
                picked.append((seq, n))
                budget -= n
        for seq in self.running:  # unfinished prefills hold blocks for all their tokens already
            if seq.num_to_compute > 1 and budget > 0:
                n = min(seq.num_to_compute, budget)
                picked.append((seq, n))
                budget -= n
        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            seq = self.waiting[0]
            if not self.blocks.can_allocate(seq):
                break
            self.waiting.popleft()
            self.blocks.allocate(seq)
            n = min(seq.num_to_compute, budget)
            self.running.append(seq)
            picked.append((seq, n))
            budget -= n
        return picked, copies

    def _make_room(self, seq: Sequence, n: int) -> bool:
        """Preempt the newest running sequences until seq can grow by n; False if seq itself went."""
        while not self.blocks.can_append(seq, n):
            victim = self.running[-1]
            self.preempt(victim)
            if victim is seq:
                return False
        return True

    def preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.blocks.free(seq)
        seq.reset_for_recompute()
        self.waiting.appendleft(seq)
        self.num_preempted += 1

    def finish(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.blocks.free(seq)
