"""Policy losses as pure tensor functions, registered by name.

All take per-token tensors [B, T]: logprobs (trainer, with grad), old_logprobs
(the sampler's), mask (1 on model tokens), and advantages [B]. They return the
scalar loss and a dict of float stats.
"""

from __future__ import annotations

from typing import Callable

import torch

LOSSES: dict[str, Callable] = {}


def register(name: str):
    def wrap(fn):
        LOSSES[name] = fn
        return fn
    return wrap


def get_loss(name: str) -> Callable:
    if name not in LOSSES:
        raise KeyError(f"unknown loss {name!r}; known: {sorted(LOSSES)}")
    return LOSSES[name]


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim=None) -> torch.Tensor:
    if dim is None:
        return (x * mask).sum() / mask.sum().clamp(min=1)
    return (x * mask).sum(dim) / mask.sum(dim).clamp(min=1)


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi || ref): exp(ref - lp) - (ref - lp) - 1 >= 0."""
    d = ref_logprobs - logprobs
    return torch.exp(d) - d - 1


@register("grpo")
def grpo_loss(logprobs, old_logprobs, advantages, mask, clip_eps: float = 0.2,
              ref_logprobs=None, kl_coef: float = 0.0):
    """GRPO (Shao et al. 2024): clipped ratio surrogate, mean over each sequence's
    tokens, then over sequences; optional k3 KL penalty to a reference policy.

    ratio = exp(lp - old); surrogate = min(ratio * A, clip(ratio, 1-eps, 1+eps) * A).
    """
    ratio = torch.exp(logprobs - old_logprobs)
    adv = advantages[:, None]
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    per_token = -surrogate
    if ref_logprobs is not None and kl_coef > 0:
        per_token = per_token + kl_coef * k3_kl(logprobs, ref_logprobs)
    has_tokens = (mask.sum(1) > 0).float()
    per_seq = masked_mean(per_token, mask, dim=1)
    loss = (per_seq * has_tokens).sum() / has_tokens.sum().clamp(min=1)
    clipped = ((ratio - 1).abs() > clip_eps).float()
    return loss, {"clip_frac": masked_mean(clipped, mask).item(),
                  "ratio_mean": masked_mean(ratio, mask).item()}


def sft_loss(logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood averaged over the masked (model) tokens."""
    return -masked_mean(logprobs, mask)
