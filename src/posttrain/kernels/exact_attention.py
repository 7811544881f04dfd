"""Exact attention: the trainer's side of batch-invariant logprobs (a transform on an HF model).

Attention sums over the head dimension and over the context, and float32 rounds differently
for every summation order: SDPA's blocked CPU kernel in the trainer's forward, the engine's
paged decode (and its cascade over shared prefixes) and even SDPA itself at two sequence
lengths differ by ~1e-5 in logprob on SmolLM2. Computed in float64, any order gives the exact
result to ~1e-16 relative, and rounding that once to float32 gives the same bits in all of
them: a difference needs a float64 error to cross a float32 rounding boundary (odds ~1e-8 per
value, and then one float32 ulp). The engine does the same with `EngineConfig(batch_invariant=
True)` (engine/paged/attention.py, dtype=float64), so an engine's logprobs equal, bit for bit in the
tests, those of a trainer whose model went through `use_exact_attention`.

It costs trainer time, more at long sequences (docs/engine-kernels.md, Limits; the runs:
bench/history/engine.md); hence a transform the caller opts into, not a default.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

NAME = "posttrain_exact"


def exact_sdpa(query, key, value, **kwargs) -> torch.Tensor:
    """F.scaled_dot_product_attention in float64, rounded once to the query's dtype (a float
    mask is widened too; a bool mask is kept). The RL trainer's packed forward calls this."""
    mask = kwargs.pop("attn_mask", None)
    if mask is not None and mask.is_floating_point():
        mask = mask.double()
    out = F.scaled_dot_product_attention(query.double(), key.double(), value.double(), attn_mask=mask, **kwargs)
    return out.to(query.dtype)


def exact_attention_forward(module, query, key, value, attention_mask, **kwargs):
    """HF attention interface: SDPA in float64, the output rounded to the query's dtype.

    query [B, H, T, D], key/value [B, KVH, S, D]; returns ([B, T, H, D], None) as HF's sdpa."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    mask = attention_mask
    if mask is not None and mask.is_floating_point():
        mask = mask.double()
    out, weights = sdpa_attention_forward(module, query.double(), key.double(), value.double(), mask, **kwargs)
    return out.to(query.dtype), weights


def _register() -> None:
    from transformers import AttentionInterface

    if NAME not in AttentionInterface._global_mapping:
        AttentionInterface.register(NAME, exact_attention_forward)


def use_exact_attention(model):
    """Switch an HF model (Llama/Qwen families) to exact attention in place; returns it.

    Autograd flows through the casts, so a trainer trains with it as with SDPA."""
    _register()
    model.config._attn_implementation = NAME
    return model


@contextlib.contextmanager
def exact_attention_on(model):
    """use_exact_attention for the duration of a block, then the model's own attention back."""
    before = model.config._attn_implementation
    use_exact_attention(model)
    try:
        yield model
    finally:
        model.config._attn_implementation = before


def uses_exact_attention(model) -> bool:
    return getattr(model.config, "_attn_implementation", None) == NAME
