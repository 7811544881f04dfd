"""Model runner: the forward pass of an HF Llama/Qwen2-family decoder over a paged KV cache.

It calls the HF model's own modules (embeddings, projections, norms, MLPs, rotary embedding),
so it shares weights with a trainer in-process and reproduces its numerics; only attention
is replaced (engine/attention.py): tokens of many sequences are packed flat, K/V are written
to their slots and read back through each sequence's block table.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from posttrain.engine.attention import attend, build_plan
from posttrain.engine.kv_cache import KVCache

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


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class ModelRunner:
    def __init__(self, model):
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

    def forward(self, batch: Batch, kv: KVCache) -> torch.Tensor:
        """Run all layers, write K/V, return float32 logits [M, V] at batch.logits_index."""
        inner = self.model.model
        n = batch.input_ids.shape[0]
        h = inner.embed_tokens(batch.input_ids).unsqueeze(0)  # [1, N, hidden]
        cos, sin = inner.rotary_emb(h, batch.positions.unsqueeze(0))
        cos, sin = cos[0].unsqueeze(1), sin[0].unsqueeze(1)  # [N, 1, D]
        plan = build_plan(batch.q_lens, batch.ctx_lens, batch.block_tables, kv.block_size, kv.null_block, self.device)
        h = h[0]
        for li, layer in enumerate(inner.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            q = attn.q_proj(x).view(n, self.num_heads, self.head_dim)
            k = attn.k_proj(x).view(n, self.num_kv_heads, self.head_dim)
            v = attn.v_proj(x).view(n, self.num_kv_heads, self.head_dim)
            if hasattr(attn, "q_norm"):  # Qwen3
                q, k = attn.q_norm(q), attn.k_norm(k)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            kv.write(li, batch.slots, k, v)
            o = attend(q, kv, li, plan, attn.scaling)  # [N, H, D]
            h = h + attn.o_proj(o.reshape(n, -1))
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        h = inner.norm(h.index_select(0, batch.logits_index))
        return self.model.lm_head(h).float()
