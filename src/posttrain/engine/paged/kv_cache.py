"""The paged KV tensors: one flat slot array per layer, slot = block * block_size + offset.

Attention reads whole blocks through block tables (16-slot copies, not per-slot gathers);
slots past a sequence's context are masked, and hold zeros: a block is zeroed when its first
slot is written (`clear_fresh_blocks`), so no earlier owner's value (a NaN, say) is left there.
Large caches are reserved with torch.empty (fresh mmap pages are zero and are touched only when
written); small ones are zeroed. One extra zeroed "null" block at index num_blocks pads tables.

int8 (opt-in, lossy) stores each group of INT8_GROUP channels of a token-head vector with one
float scale (absmax / 127): group-wise scales keep one outlier channel (common in keys) from
crushing the rest. About 1.25 bytes per value, against 4 for float32.
"""

from __future__ import annotations

import torch

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "int8": 1}
INT8_GROUP = 16  # channels sharing one int8 scale
EAGER_ZERO_BYTES = 64 * 2**20  # above glibc's largest mmap threshold (32 MB): fresh pages are zero


def _groups(head_dim: int) -> int:
    return head_dim // INT8_GROUP if head_dim % INT8_GROUP == 0 else 1


def _nbytes(shape, dtype) -> int:
    n = torch.empty((), dtype=dtype).element_size()
    for d in shape:
        n *= d
    return n


def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, kv_dtype: str) -> int:
    """K and V for one token across all layers; int8 adds a float32 scale per channel group."""
    per_head = head_dim * DTYPE_BYTES[kv_dtype] + (4 * _groups(head_dim) if kv_dtype == "int8" else 0)
    return 2 * num_layers * num_kv_heads * per_head


def kv_store_dtype(kv_dtype: str, compute_dtype: torch.dtype) -> str:
    """float32 KV means full precision: the compute dtype itself when that is bf16."""
    return "bfloat16" if kv_dtype == "float32" and compute_dtype == torch.bfloat16 else kv_dtype


def default_num_blocks(runner, config, max_model_len: int) -> int:
    """Blocks for max_num_seqs sequences of max_model_len tokens, capped by kv_memory_mb."""
    per_token = kv_bytes_per_token(runner.num_layers, runner.num_kv_heads, runner.head_dim,
                                   kv_store_dtype(config.kv_dtype, runner.dtype))
    want = config.max_num_seqs * max_model_len
    cap = int(config.kv_memory_mb * 2**20 // per_token)
    return max(min(want, cap) // config.block_size, 1)


def _take_blocks(blocks: torch.Tensor, tables: torch.Tensor) -> torch.Tensor:
    """blocks[tables] through index_select (one contiguous copy per block; faster on CPU than
    advanced indexing): [NBLK, bs, ...] x [B, NB] -> [B, NB, bs, ...]."""
    return blocks.index_select(0, tables.flatten()).view(*tables.shape, *blocks.shape[1:])


class KVCache:
    """K and V side by side in one tensor [layers, slots, 2, KVH, D] (index 0 of the third axis is
    K): a step writes both with one copy and attention gathers both with one, as strided views."""

    def __init__(self, num_layers, num_blocks, block_size, num_kv_heads, head_dim, kv_dtype, compute_dtype, device):
        self.block_size = block_size
        self.quantized = kv_dtype == "int8"
        self.compute_dtype = compute_dtype
        store = torch.int8 if self.quantized else getattr(torch, kv_dtype)
        self.null_block = num_blocks
        shape = (num_layers, (num_blocks + 1) * block_size, 2, num_kv_heads, head_dim)
        alloc = torch.empty if _nbytes(shape, store) > EAGER_ZERO_BYTES else torch.zeros
        self.kv = alloc(shape, dtype=store, device=device)
        if self.quantized:
            self.groups = _groups(head_dim)
            self.scale = alloc((*shape[:4], self.groups), dtype=torch.float32, device=device)
        for t in self._tensors():
            t[:, num_blocks * block_size :] = 0

    def clear_fresh_blocks(self, slots: torch.Tensor) -> None:
        """Zero, in every layer, each block whose first slot `slots` is about to write: a block is
        written from its start, so its slots past a sequence's context hold zeros, never an earlier
        owner's values (a NaN there would survive masking: 0 * NaN = NaN). Once per step."""
        starts = slots[slots % self.block_size == 0]
        if len(starts):
            blocks = starts // self.block_size
            for t in self._tensors():
                t.view(t.shape[0], -1, self.block_size, *t.shape[2:])[:, blocks] = 0

    def _tensors(self) -> list[torch.Tensor]:
        return [self.kv] + ([self.scale] if self.quantized else [])

    def write(self, layer: int, slots: torch.Tensor, kv: torch.Tensor) -> None:
        """slots: [N]; kv: [N, 2, KVH, D], K then V of each token."""
        if self.quantized:
            g = kv.unflatten(-1, (self.groups, -1))  # [N, 2, KVH, G, D/G]
            scale = g.abs().amax(dim=-1).clamp(min=1e-8) / 127.0  # [N, 2, KVH, G]
            q = torch.round(g / scale.unsqueeze(-1)).clamp(-127, 127).to(torch.int8).flatten(-2)
            self.kv[layer].index_copy_(0, slots, q)
            self.scale[layer].index_copy_(0, slots, scale.float())
        else:
            self.kv[layer].index_copy_(0, slots, kv.to(self.kv.dtype))

    def read(self, layer: int, tables: torch.Tensor, dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """tables: [B, NB] block ids -> k, v: [B, NB * block_size, KVH, D] in `dtype` (default: the
        compute dtype): views into one gathered copy when no cast is needed."""
        want = dtype or self.compute_dtype
        bs = self.block_size
        x = _take_blocks(self.kv[layer].view(-1, bs, *self.kv.shape[2:]), tables).flatten(1, 2)  # [B, L, 2, KVH, D]
        if self.quantized:
            scales = _take_blocks(self.scale[layer].view(-1, bs, *self.scale.shape[2:]), tables).flatten(1, 2)
            x = x.to(self.compute_dtype).unflatten(-1, (self.groups, -1))  # [B, L, 2, KVH, G, D/G]
            x = (x * scales.unsqueeze(-1).to(self.compute_dtype)).flatten(-2)
        x = x if x.dtype == want else x.to(want)
        return x[:, :, 0], x[:, :, 1]

    def copy_blocks(self, pairs: list[tuple[int, int]]) -> None:
        """Copy-on-write: duplicate whole blocks src -> dst in every layer."""
        bs = self.block_size
        for src, dst in pairs:
            for t in self._tensors():
                t[:, dst * bs : (dst + 1) * bs] = t[:, src * bs : (src + 1) * bs]
