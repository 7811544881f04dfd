"""RoutingCache: each KV slot's chosen experts per MoE layer, kept beside the KV cache.

The runner writes a token's experts where it writes its K/V (the same slots), so whatever the
KV cache keeps the routing keeps too: prefix-cache hits, a GRPO group's forked prompt blocks,
copy-on-write copies, recomputation after preemption. A finished sequence's routing is read
through its block table before its blocks are freed.
"""

from __future__ import annotations

import torch


class RoutingCache:
    def __init__(self, num_blocks: int, block_size: int, num_layers: int, k: int):
        self.block_size = block_size
        self.table = torch.zeros(num_blocks * block_size, num_layers, k, dtype=torch.int16)  # [slots, L, k]

    def write(self, layer: int, slots: torch.Tensor, experts: torch.Tensor) -> None:
        """experts [N, k] of the tokens written at slots [N], for MoE layer `layer` (0-based among them)."""
        self.table[slots.cpu(), layer] = experts.to(torch.int16).cpu()

    def copy_blocks(self, pairs: list[tuple[int, int]]) -> None:
        """Copy-on-write, as KVCache.copy_blocks: whole blocks src -> dst."""
        bs = self.block_size
        for src, dst in pairs:
            self.table[dst * bs:(dst + 1) * bs] = self.table[src * bs:(src + 1) * bs]

    def read(self, block_table: list[int], n: int) -> list[list[list[int]]]:
        """The experts of positions 0..n-1 of a sequence, [n][layers][k]."""
        pos = torch.arange(n)
        slots = torch.tensor(block_table, dtype=torch.long)[pos // self.block_size] * self.block_size \
            + pos % self.block_size
        return self.table[slots].tolist()
