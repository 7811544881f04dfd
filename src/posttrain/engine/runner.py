"""Model runner: the forward pass of an HF Llama/Qwen2-family decoder over a paged KV cache.

It calls the HF model's own modules (embeddings, projections, norms, MLPs, rotary embedding),
so it shares weights with a trainer in-process and reproduces its numerics; only attention
is replaced (engine/attention.py): tokens of many sequences are packed flat, K/V are written
to their slots and read back through each sequence's block table.

Its linears are called through engine/packed.py: with `packed=True` (CPU) the weights are
pre-packed for MKL (fp32) or oneDNN (bf16), which is faster and batch-invariant (a token's
logits do not depend on how many tokens share its step, and match the trainer's forward);
with `attn_dtype=torch.float64` attention runs in float64 (engine/exact_attention.py), so its
result does not depend on the order the paged layout sums in either.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from posttrain.engine.attention import attend, build_plan
from posttrain.engine.kv_cache import KVCache
from posttrain.engine.layers import rms_norm, rotary, signed_sines
from posttrain.engine.packed import linears_of

SUPPORTED = ("llama", "qwen2", "qwen3", "mistral")


@dataclass
class Batch:
    """One step's packed tokens. N tokens over S sequences; M positions need logits."""

    input_ids: torch.Tensor  # [N]
    positions: torch.Tensor  # [N]
    slots: torch.Tensor  # [N] KV slot each token writes
    q_lens: list[int]  # [S] tokens computed per sequence this step
    ctx_lens: list[int]  # [S] KV length per sequence after this step
    block_tables: list[list[int]]  # [S]
    logits_index: torch.Tensor  # [M] rows of the packed tokens whose next-token logits we need


class ModelRunner:
    def __init__(self, model, packed: bool = False, attn_dtype: torch.dtype | None = None):
        cfg = model.config
        if cfg.model_type not in SUPPORTED:
            raise ValueError(f"model type {cfg.model_type!r} is not supported (use one of {SUPPORTED})")
        self.model = model
        self.config = cfg
        self.num_heads = cfg.num_attention_heads
        self.num_kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.num_layers = cfg.num_hidden_layers
        self.dtype = next(model.parameters()).dtype
        self.device = next(model.parameters()).device
        self.linears = linears_of(model, packed)  # share the model's weights (packed: a copy that follows them)
        self.act = model.model.layers[0].mlp.act_fn if self.num_layers else None
        self.attn_dtype = attn_dtype  # None: the compute dtype; float64: exact (engine/exact_attention.py)

    def weights_changed(self) -> None:
        """Repack before the next forward (in-place updates are also caught by version)."""
        for layer in self.linears:
            for lin in layer.values():
                lin.invalidate()

    def forward(self, batch: Batch, kv: KVCache) -> torch.Tensor:
        """Run all layers, write K/V, return float32 logits [M, V] at batch.logits_index."""
        inner = self.model.model
        n = batch.input_ids.shape[0]
        h = inner.embed_tokens(batch.input_ids).unsqueeze(0)  # [1, N, hidden]
        cos, sin = inner.rotary_emb(h, batch.positions.unsqueeze(0))
        cos, sin = cos[0].unsqueeze(1), sin[0].unsqueeze(1)  # [N, 1, D]
        sin = signed_sines(sin)
        plan = build_plan(batch.q_lens, batch.ctx_lens, batch.block_tables, kv.block_size, kv.null_block, self.device)
        kv.clear_fresh_blocks(batch.slots)
        h = h[0]
        for li, (layer, lin) in enumerate(zip(inner.layers, self.linears)):
            attn = layer.self_attn
            x = _norm(layer.input_layernorm, h)
            q, k, v = lin["qkv"](x).view(n, -1, self.head_dim).split(
                [self.num_heads, self.num_kv_heads, self.num_kv_heads], dim=1)
            if hasattr(attn, "q_norm"):  # Qwen3
                q, k = attn.q_norm(q), attn.k_norm(k)
            q, k = rotary(q, cos, sin), rotary(k, cos, sin)
            kv.write(li, batch.slots, k, v)
            o = attend(q, kv, li, plan, attn.scaling, self.attn_dtype)  # [N, H, D]
            h = h + lin["o"](o.reshape(n, -1))
            x = _norm(layer.post_attention_layernorm, h)
            gate, up = lin["gate_up"](x).chunk(2, dim=-1)
            h = h + lin["down"](self.act(gate) * up)  # the Llama/Qwen MLP
        h = _norm(inner.norm, h.index_select(0, batch.logits_index))
        return self.linears[-1]["head"](h).float()


def _norm(module, x: torch.Tensor) -> torch.Tensor:
    """An HF RMSNorm module (Llama/Qwen families) through the fused kernel."""
    return rms_norm(x, module.weight, module.variance_epsilon)
