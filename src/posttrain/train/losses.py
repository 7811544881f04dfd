"""Policy losses as pure tensor functions, registered by name.

All take per-token tensors [B, T]: logprobs (trainer, with grad), old_logprobs (the
policy the PPO ratio is taken against), mask (1 on model tokens), and advantages [B].
Optional keywords: clip_eps / clip_eps_high (the clip range), ref_logprobs + kl_coef
(k3 penalty to a reference), rollout_logprobs + tis_cap + tis_level (truncated
importance sampling against the sampler, see `tis_weights`), norm_len (Dr.GRPO's
constant). They return the scalar loss and a dict of float stats.

Each loss says how the trainer weights its micro-batches (`LOSS_WEIGHTING`): "seq"
losses average over sequences, "token" losses over all tokens of the batch.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

LOSSES: dict[str, Callable] = {}
LOSS_WEIGHTING: dict[str, str] = {}


def register(name: str, weighting: str = "seq"):
    def wrap(fn):
        LOSSES[name], LOSS_WEIGHTING[name] = fn, weighting
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


def tis_weights(old_logprobs, rollout_logprobs, mask, cap: float, level: str = "token"):
    """Truncated IS weights w = min(pi_old / pi_rollout, cap), no grad; [B, T].

    level "token": one ratio per token. level "sequence": the geometric mean of the
    sequence's token ratios, exp(mean_t(old - rollout)), truncated and broadcast.
    """
    d = (old_logprobs - rollout_logprobs).detach() * mask
    if level == "token":
        raw = torch.exp(d)
    elif level == "sequence":
        raw = torch.exp(masked_mean(d, mask, dim=1))[:, None].expand_as(d)
    else:
        raise ValueError(f"tis level must be token or sequence, not {level!r}")
    return raw.clamp(max=cap), ((raw > cap).float() * mask)


def _surrogate(logprobs, old_logprobs, advantages, clip_low: float, clip_high: float):
    """Per-token PPO surrogate min(r A, clip(r, 1-low, 1+high) A), r = exp(lp - old); [B, T]."""
    ratio = torch.exp(logprobs - old_logprobs)
    adv = advantages[:, None]
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - clip_low, 1 + clip_high) * adv)
    clipped = ((ratio < 1 - clip_low) | (ratio > 1 + clip_high)).float()
    return surrogate, ratio, clipped


def _per_token(logprobs, old_logprobs, advantages, mask, clip_low, clip_high, kw) -> tuple:
    """-surrogate, TIS-weighted, plus the KL penalty; and the shared stats."""
    surrogate, ratio, clipped = _surrogate(logprobs, old_logprobs, advantages, clip_low, clip_high)
    per_token = -surrogate
    stats = {"clip_frac": masked_mean(clipped, mask).item(), "ratio_mean": masked_mean(ratio, mask).item()}
    if kw.get("rollout_logprobs") is not None and kw.get("tis_cap"):
        w, truncated = tis_weights(old_logprobs, kw["rollout_logprobs"], mask, kw["tis_cap"],
                                   kw.get("tis_level", "token"))
        per_token = per_token * w
        stats |= {"tis_weight_mean": masked_mean(w, mask).item(),
                  "tis_truncated_frac": masked_mean(truncated, mask).item()}
    if kw.get("ref_logprobs") is not None and kw.get("kl_coef", 0.0) > 0:
        per_token = per_token + kw["kl_coef"] * k3_kl(logprobs, kw["ref_logprobs"])
    return per_token, stats


def _seq_mean(per_token, mask):
    """Mean over each sequence's tokens, then over sequences that have tokens."""
    has_tokens = (mask.sum(1) > 0).float()
    return (masked_mean(per_token, mask, dim=1) * has_tokens).sum() / has_tokens.sum().clamp(min=1)


@register("grpo")
def grpo_loss(logprobs, old_logprobs, advantages, mask, clip_eps: float = 0.2, **kw):
    """GRPO (Shao et al. 2024): clipped ratio surrogate, mean over each sequence's
    tokens, then over sequences; optional k3 KL penalty to a reference policy.

    ratio = exp(lp - old); surrogate = min(ratio * A, clip(ratio, 1-eps, 1+eps) * A).
    """
    per_token, stats = _per_token(logprobs, old_logprobs, advantages, mask, clip_eps, clip_eps, kw)
    return _seq_mean(per_token, mask), stats


@register("dr_grpo")
def dr_grpo_loss(logprobs, old_logprobs, advantages, mask, clip_eps: float = 0.2,
                 norm_len: int = 512, **kw):
    """Dr.GRPO (Liu et al. 2025): the GRPO surrogate summed over each sequence's tokens
    and divided by a constant norm_len (no length bias), then averaged over sequences.
    Pair it with unscaled advantages r - mean_g (advantage estimator "dr_grpo")."""
    per_token, stats = _per_token(logprobs, old_logprobs, advantages, mask, clip_eps, clip_eps, kw)
    return (per_token * mask).sum(1).mean() / norm_len, stats


@register("dapo", weighting="token")
def dapo_loss(logprobs, old_logprobs, advantages, mask, clip_eps: float = 0.2,
              clip_eps_high: float | None = 0.28, **kw):
    """DAPO (Yu et al. 2025): clip-higher (ratio in [1-eps, 1+eps_high], eps_high > eps)
    and a token-level mean over every token of the batch, so long replies count per token."""
    high = clip_eps if clip_eps_high is None else clip_eps_high
    per_token, stats = _per_token(logprobs, old_logprobs, advantages, mask, clip_eps, high, kw)
    return masked_mean(per_token, mask), stats


@register("rloo")
def rloo_loss(logprobs, old_logprobs, advantages, mask, **kw):
    """RLOO (Ahmadian et al. 2024): REINFORCE on whole sequences, -A * sum_t ratio_t with
    leave-one-out advantages A_i = r_i - mean_{j != i} r_j; no clipping; mean over sequences.
    At ratio 1 the gradient is -A * grad sum_t log p."""
    per_token, stats = _per_token(logprobs, old_logprobs, advantages, mask, float("inf"),
                                  float("inf"), kw)
    return (per_token * mask).sum(1).mean(), stats


@register("ppo_clip", weighting="token")
def ppo_clip_loss(logprobs, old_logprobs, advantages, mask, clip_eps: float = 0.2, **kw):
    """PPO-clip without a critic: the symmetric clipped surrogate, token-level mean, with
    a batch baseline instead of a value function (advantage estimator "batch")."""
    per_token, stats = _per_token(logprobs, old_logprobs, advantages, mask, clip_eps, clip_eps, kw)
    return masked_mean(per_token, mask), stats


def sft_loss(logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood averaged over the masked (model) tokens."""
    return -masked_mean(logprobs, mask)
