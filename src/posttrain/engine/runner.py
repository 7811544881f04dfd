"""Model runner: the forward pass of an HF Llama/Qwen2-family decoder over a paged KV cache.

It calls the HF model's own modules (embeddings, projections, norms, MLPs, rotary embedding),
so it shares weights with a trainer in-process and reproduces its numerics; only attention
is replaced: tokens of many sequences are packed flat, K/V are written to their slots and
read back through each sequence's block table.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from posttrain.engine.kv_cache import KVCache

SUPPORTED = ("llama", "qwen2", "qwen3", "mistral")
MAX_SCORE_ELEMS = 1 << 26  # split long prefill chunks so one score matrix stays ~256 MB


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
        plan = _attention_plan(batch, kv.block_size, kv.null_block, self.device)
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
            o = _attend(q, kv, li, plan, attn.scaling)  # [N, H, D]
            h = h + attn.o_proj(o.reshape(n, -1))
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        h = inner.norm(h.index_select(0, batch.logits_index))
        return self.model.lm_head(h).float()


def _attention_plan(batch: Batch, block_size: int, null_block: int, device) -> list[dict]:
    """Group sequences into decode (q_len 1) and multi-token sets with padded gather indices.

    Key positions past a sequence's context read the zeroed null block, never stale slots.
    """
    groups = {}
    for s, q in enumerate(batch.q_lens):
        groups.setdefault(q == 1, []).append(s)
    starts = [0]
    for q in batch.q_lens:
        starts.append(starts[-1] + q)
    plan = []
    for seqs in groups.values():
        qmax = max(batch.q_lens[s] for s in seqs)
        lmax = max(batch.ctx_lens[s] for s in seqs)
        nb = -(-lmax // block_size)
        tables = torch.zeros(len(seqs), nb, dtype=torch.long)
        tok = torch.zeros(len(seqs), qmax, dtype=torch.long)
        valid_q = torch.zeros(len(seqs), qmax, dtype=torch.bool)
        for r, s in enumerate(seqs):
            bt = batch.block_tables[s][:nb]
            tables[r, : len(bt)] = torch.tensor(bt, dtype=torch.long)
            q = batch.q_lens[s]
            tok[r, :q] = torch.arange(starts[s], starts[s] + q)
            valid_q[r, :q] = True
        offs = torch.arange(block_size)
        index = (tables.unsqueeze(-1) * block_size + offs).view(len(seqs), -1)[:, :lmax]
        ctx = torch.tensor([batch.ctx_lens[s] for s in seqs])
        keys = torch.arange(lmax)
        index = torch.where(keys < ctx.unsqueeze(-1), index, null_block * block_size)
        qlen = torch.tensor([batch.q_lens[s] for s in seqs])
        qpos = (ctx - qlen).unsqueeze(-1) + torch.arange(qmax)  # [G, Qmax] absolute positions
        mask = (keys.view(1, 1, -1) <= qpos.unsqueeze(-1)) & (keys.view(1, 1, -1) < ctx.view(-1, 1, 1))
        plan.append(
            dict(
                index=index.to(device),
                tok=tok.to(device),
                valid=valid_q.to(device),
                mask=mask.unsqueeze(1).to(device),  # [G, 1, Qmax, Lmax]
            )
        )
    return plan


def _attend(q: torch.Tensor, kv: KVCache, layer: int, plan: list[dict], scale: float) -> torch.Tensor:
    """Attention for every packed query token through its sequence's block table; [N, H, D]."""
    out = torch.empty_like(q)
    for g in plan:
        k, v = kv.read(layer, g["index"])  # [G, L, KVH, D]
        k, v = k.transpose(1, 2), v.transpose(1, 2)  # [G, KVH, L, D]
        qg = q[g["tok"]].transpose(1, 2)  # [G, H, Qmax, D]
        qmax, lmax = qg.shape[2], k.shape[2]
        step = max(1, MAX_SCORE_ELEMS // max(qg.shape[0] * qg.shape[1] * lmax, 1))
        parts = []
        for a in range(0, qmax, step):
            parts.append(
                F.scaled_dot_product_attention(
                    qg[:, :, a : a + step], k, v, attn_mask=g["mask"][:, :, a : a + step],
                    scale=scale, enable_gqa=True,
                )
            )
        og = torch.cat(parts, dim=2).transpose(1, 2)  # [G, Qmax, H, D]
        out[g["tok"][g["valid"]]] = og[g["valid"]]
    return out

