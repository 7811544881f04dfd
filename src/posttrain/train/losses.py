"""Policy losses as pure tensor functions, registered by name.

All take per-token tensors [B, T]: logprobs (trainer, with grad), old_logprobs (the
policy the PPO ratio is taken against), mask (1 on model tokens), and advantages [B].
Optional keywords: clip_eps / clip_eps_high (the clip range), ref_logprobs + kl_coef
(+ kl_estimator, a name in train.kl.KL_ESTIMATORS, "k3" by default, and kl_mode, see
`_per_token`: the KL to a reference), rollout_logprobs + tis_cap + tis_level (truncated
importance sampling against the sampler, see `tis_weights`), norm_len (Dr.GRPO's
constant). They return the scalar loss and a dict of float stats.

Each loss says how the trainer weights its micro-batches (`LOSS_WEIGHTING`): "seq"
losses average over sequences, "token" losses over all tokens of the batch.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from posttrain.train.kl import KL_ESTIMATORS

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


def _surrogate(logprobs, old_logprobs, adv, clip_low: float, clip_high: float):
    """Per-token PPO surrogate min(r A, clip(r, 1-low, 1+high) A), r = exp(lp - old); [B, T].
    adv: [B, 1] (one per sequence) or [B, T] (per token)."""
    ratio = torch.exp(logprobs - old_logprobs)
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - clip_low, 1 + clip_high) * adv)
    clipped = ((ratio < 1 - clip_low) | (ratio > 1 + clip_high)).float()
    return surrogate, ratio, clipped


def _reference_kl(logprobs, kw) -> torch.Tensor | None:
    """The per-token KL to the reference [B, T] by kw's estimator, or None without one."""
    if kw.get("ref_logprobs") is None or kw.get("kl_coef", 0.0) <= 0:
        return None
    return KL_ESTIMATORS[kw.get("kl_estimator", "k3")](logprobs, kw["ref_logprobs"])


def _per_token(logprobs, old_logprobs, advantages, mask, clip_low, clip_high, kw) -> tuple:
    """-surrogate, TIS-weighted, with the KL to the reference; and the shared stats.

    kl_mode "loss" (default, GRPO's): + kl_coef * KL_t, differentiated. kl_mode "penalty" (the
    KL in the reward, as PPO-RLHF): each token's advantage becomes A - kl_coef * KL_t, no
    gradient through KL_t."""
    kl = _reference_kl(logprobs, kw)
    adv = advantages[:, None]
    if kl is not None and kw.get("kl_mode", "loss") == "penalty":
        adv = adv - kw["kl_coef"] * kl.detach()
    surrogate, ratio, clipped = _surrogate(logprobs, old_logprobs, adv, clip_low, clip_high)
    per_token = -surrogate
    stats = {"clip_frac": masked_mean(clipped, mask).item(), "ratio_mean": masked_mean(ratio, mask).item()}
    if kw.get("rollout_logprobs") is not None and kw.get("tis_cap"):
        w, truncated = tis_weights(old_logprobs, kw["rollout_logprobs"], mask, kw["tis_cap"],
                                   kw.get("tis_level", "token"))
        per_token = per_token * w
        stats |= {"tis_weight_mean": masked_mean(w, mask).item(),
                  "tis_truncated_frac": masked_mean(truncated, mask).item()}
    if kl is not None and kw.get("kl_mode", "loss") == "loss":
        per_token = per_token + kw["kl_coef"] * kl
    return per_token, stats


def _seq_mean(per_token, mask):
    """Mean over each sequence's tokens, then over sequences that have tokens."""
    has_tokens = (mask.sum(1) > 0).float()
    return (masked_mean(per_token, mask, dim=1) * has_tokens).sum() / has_tokens.sum().clamp(min=1)


@register("grpo")
def grpo_loss(logprobs, old_logprobs, advantages, mask, clip_eps: float = 0.2, **kw):
    """GRPO (Shao et al. 2024): clipped ratio surrogate, mean over each sequence's
    tokens, then over sequences; optional KL to a reference policy.

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
