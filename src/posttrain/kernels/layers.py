"""The decoder's elementwise pieces with HF's bits, shared by the engine's runner and the RL
trainer's packed forward (train/packed.py): RMSNorm through torch's fused kernel, and rotary
embedding with rotate_half's sign folded into the sines."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """HF's LlamaRMSNorm in one fused call (the same bits in float32; bf16 rounds once, not twice)."""
    return F.rms_norm(x, weight.shape, weight, eps)


def signed_sines(sin: torch.Tensor) -> torch.Tensor:
    """sin [..., D] with its first half negated: rotate_half's sign, moved onto the sines."""
    half = sin.shape[-1] // 2
    return torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)


def rotary(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """HF's x * cos + rotate_half(x) * sin with the same bits: rotate_half(x) = cat(-x2, x1) is
    roll(x, D/2) with the sign on the sines ((-a) * b == a * (-b) exactly); one copy less."""
    return x * cos + x.roll(x.shape[-1] // 2, dims=-1) * signed_sin
