"""EngineConfig: the knobs of the paged engine, checked when built (see docs/engine.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch


@dataclass
class EngineConfig:
    # tokens per KV block; None: 32 for bf16 on a CPU with AMX (vLLM-CPU's AMX attention tiles take
    # 32-slot blocks, faster in decode and prefill: BENCHMARKS.md "Engine"), else 16
    # (small blocks waste little)
    block_size: int | None = None
    num_blocks: int | None = None  # None: enough for max_num_seqs full contexts, capped by kv_memory_mb
    kv_memory_mb: float = 1024.0  # cap on KV cache bytes when num_blocks is None
    max_num_seqs: int = 256  # sequences decoded together
    max_num_batched_tokens: int = 2048  # token budget of one step (chunked prefill)
    max_model_len: int | None = None  # None: the model's max_position_embeddings
    enable_prefix_caching: bool = True
    kv_dtype: Literal["float32", "bfloat16", "int8"] = "float32"  # int8: opt-in, lossy
    dtype: Literal["float32", "bfloat16", "auto"] = "float32"  # compute; auto: bf16 where the CPU has it
    weights: Literal["compute", "int8"] = "compute"  # int8: weight-only int8 for bf16 decode on CPU; lossy, opt-in
    kernels: Literal["auto", "torch", "vllm"] = "auto"  # attention: vLLM-CPU's paged kernels where found (auto)
    batch_invariant: bool = False  # fp32: exact (float64) attention, logprobs bit-equal to the trainer's (docs/engine-kernels.md)
    spec_method: Literal["none", "ngram", "draft"] = "none"
    spec_tokens: int = 4  # draft tokens proposed per step
    ngram_max: int = 4  # longest suffix n-gram looked up in the context
    ngram_min: int = 1

    def __post_init__(self):
        if self.block_size is not None and self.block_size < 1:
            raise ValueError("block_size must be >= 1")
        if self.num_blocks is not None and self.num_blocks < 1:
            raise ValueError("num_blocks must be >= 1")
        if self.max_num_seqs < 1 or self.max_num_batched_tokens < 1:
            raise ValueError("max_num_seqs and max_num_batched_tokens must be >= 1")
        if self.kv_dtype not in ("float32", "bfloat16", "int8"):
            raise ValueError(f"kv_dtype must be float32, bfloat16 or int8, not {self.kv_dtype!r}")
        if self.dtype not in ("float32", "bfloat16", "auto"):
            raise ValueError(f"dtype must be float32, bfloat16 or auto, not {self.dtype!r}")
        if self.weights not in ("compute", "int8"):
            raise ValueError(f"weights must be compute (the compute dtype) or int8, not {self.weights!r}")
        if self.kernels not in ("auto", "torch", "vllm"):
            raise ValueError(f"kernels must be auto, torch or vllm, not {self.kernels!r}")
        if self.spec_method not in ("none", "ngram", "draft"):
            raise ValueError(f"spec_method must be none, ngram or draft, not {self.spec_method!r}")
        if self.spec_tokens < 1 or not 1 <= self.ngram_min <= self.ngram_max:
            raise ValueError("spec_tokens >= 1 and 1 <= ngram_min <= ngram_max are required")
        if self.spec_tokens + 1 > self.max_num_batched_tokens:
            raise ValueError("max_num_batched_tokens must exceed spec_tokens")


def default_block_size(dtype: torch.dtype, device: torch.device) -> int:
    """EngineConfig.block_size None: 32 where bf16 attention runs on AMX tiles, else 16."""
    amx = device.type == "cpu" and torch.cpu._is_amx_tile_supported()
    return 32 if amx and dtype == torch.bfloat16 else 16
