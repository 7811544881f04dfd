"""The engine's sparse-MoE MLP (Qwen3-MoE): the HF block's own router and experts over the packed
tokens, with each token's chosen experts returned beside the output (they go to the routing
cache, engine/paged/routing.py, and out with the completion for the trainer to replay)."""

from __future__ import annotations

import torch


def moe_mlp(block, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [N, hidden] (normed) -> (the block's output [N, hidden], chosen experts [N, k]).
    The router's logits are in the engine's dtype, their softmax in float32, then top-k and (with
    norm_topk_prob) renormalised: HF's own router, so a bf16 engine routes as HF does in bf16."""
    _, weights, experts = block.gate(x)
    return block.experts(x, experts, weights), experts
