"""Sparse-MoE blocks of HF models (Qwen3-MoE's layout), found the same way by the engine and the trainer."""

from __future__ import annotations


def is_moe_block(mlp) -> bool:
    """An HF sparse-MoE block: a top-k router `gate` and stacked `experts` (Qwen3-MoE's layout)."""
    return hasattr(mlp, "gate") and hasattr(mlp, "experts") and hasattr(mlp.gate, "top_k")


def moe_blocks(model) -> list:
    """The model's sparse-MoE blocks in layer order ([] for a dense model)."""
    layers = getattr(getattr(model, "model", None), "layers", [])
    return [layer.mlp for layer in layers if is_moe_block(layer.mlp)]
