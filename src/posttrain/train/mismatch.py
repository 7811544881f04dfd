"""Training–inference mismatch between the trainer's and the sampler's logprobs of the
same sampled tokens (Yao et al. 2025; ms-swift's rollout_correction metrics).

All inputs are [B, T] with a mask [B, T] (1 on model tokens); returns float stats.
"""

from __future__ import annotations

import torch

from posttrain.train.kl import k3_kl
from posttrain.train.losses import masked_mean


def mismatch_stats(logprobs: torch.Tensor, rollout_logprobs: torch.Tensor,
                   mask: torch.Tensor) -> dict[str, float]:
    """k3 KL(sampler || trainer), max |Δlogp|, mean w and effective sample size of the
    per-token importance weights w = p_trainer / p_sampler.

    ESS = (Σw)² / (n Σw²) in (0, 1]: 1 when every weight is equal (no mismatch).
    """
    lp, ro = logprobs.detach(), rollout_logprobs.detach()
    n = mask.sum()
    if n == 0:
        return {"mismatch_k3": 0.0, "mismatch_max_abs": 0.0, "is_weight_mean": 1.0, "ess": 1.0}
    w = torch.exp((lp - ro) * mask) * mask
    ess = (w.sum() ** 2 / (n * (w ** 2).sum()).clamp(min=1e-30)).item()
    return {"mismatch_k3": masked_mean(k3_kl(ro, lp), mask).item(),
            "mismatch_max_abs": ((lp - ro).abs() * mask).max().item(),
            "is_weight_mean": (w.sum() / n).item(), "ess": ess}
