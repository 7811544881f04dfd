"""Per-token estimators of KL(pi || ref) from the logprobs of sampled tokens, registered by name
(RLConfig.kl_estimator). Schulman, "Approximating KL divergence" (2020): with tokens sampled from
pi and d = logp_ref - logp,
    k1 = -d                    unbiased, high variance, negative on some tokens
    k2 = d^2 / 2               biased, low variance, >= 0; as a loss, on-policy, its gradient is KL's
    k3 = exp(d) - d - 1        unbiased, low variance, >= 0 (GRPO's)
Each takes logprobs [B, T] and ref_logprobs [B, T] and returns [B, T]; masking is the caller's.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

KL_ESTIMATORS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {}


def register_kl(name: str):
    def wrap(fn):
        KL_ESTIMATORS[name] = fn
        return fn
    return wrap


@register_kl("k1")
def k1_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """logp - logp_ref, [B, T]. As a loss its expected gradient is 0 on-policy: use it as a penalty."""
    return logprobs - ref_logprobs


@register_kl("k2")
def k2_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """(logp - logp_ref)^2 / 2, [B, T]."""
    return 0.5 * (logprobs - ref_logprobs) ** 2


@register_kl("k3")
def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """exp(logp_ref - logp) - (logp_ref - logp) - 1 >= 0, [B, T]."""
    d = ref_logprobs - logprobs
    return torch.exp(d) - d - 1
