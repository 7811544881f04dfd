"""Advantage estimators, registered by name: rewards [N] and group ids [N] in, advantages [N] out.

grpo: (r - mean_g) / std_g; dr_grpo: r - mean_g; rloo: r - mean of the others in the group;
batch: (r - mean) / std over the whole batch (a critic-free PPO baseline).
A group whose rewards are all equal gets 0 under the group estimators (no signal).
With by_domain, any estimator's advantages are then whitened within each domain of the
batch (domain_normalized), so a domain with larger rewards or more signal does not
outweigh the others in the step.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import torch

from posttrain.types import Episode

ADVANTAGES: dict[str, Callable] = {}
# The estimator each loss is paired with unless the config names another.
DEFAULT_FOR_LOSS = {"grpo": "grpo", "dr_grpo": "dr_grpo", "dapo": "grpo", "rloo": "rloo",
                    "ppo_clip": "batch"}


def register(name: str):
    def wrap(fn):
        ADVANTAGES[name] = fn
        return fn
    return wrap


def get_advantage(name: str) -> Callable:
    if name not in ADVANTAGES:
        raise KeyError(f"unknown advantage estimator {name!r}; known: {sorted(ADVANTAGES)}")
    return ADVANTAGES[name]


def group_normalized(rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-6,
                     scale_by_std: bool = True) -> torch.Tensor:
    """A_i = (r_i - mean_g) / (std_g + eps), std over the group (population std).

    rewards, group_ids: [N]. A group whose rewards are all equal gets advantage 0.
    scale_by_std=False gives Dr.GRPO's unscaled r_i - mean_g.
    """
    adv = torch.zeros_like(rewards)
    for g in group_ids.unique():
        idx = group_ids == g
        r = rewards[idx]
        centered = r - r.mean()
        std = r.std(unbiased=False)
        if scale_by_std:
            centered = centered / (std + eps) if std > 0 else torch.zeros_like(centered)
        adv[idx] = centered
    return adv


@register("grpo")
def grpo_advantages(rewards, group_ids):
    return group_normalized(rewards, group_ids)


@register("dr_grpo")
def dr_grpo_advantages(rewards, group_ids):
    return group_normalized(rewards, group_ids, scale_by_std=False)


@register("rloo")
def rloo_advantages(rewards, group_ids):
    """A_i = r_i - (sum_g - r_i) / (n_g - 1) = n_g / (n_g - 1) * (r_i - mean_g)."""
    adv = torch.zeros_like(rewards)
    for g in group_ids.unique():
        idx = group_ids == g
        n = int(idx.sum())
        if n > 1:
            r = rewards[idx]
            adv[idx] = r - (r.sum() - r) / (n - 1)
    return adv


@register("batch")
def batch_advantages(rewards, group_ids, eps: float = 1e-6):
    """Whitened over the whole batch: (r - mean) / (std + eps); 0 if all rewards are equal."""
    std = rewards.std(unbiased=False)
    return (rewards - rewards.mean()) / (std + eps) if std > 0 else torch.zeros_like(rewards)


def domain_normalized(adv: torch.Tensor, domain_ids: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """A_i = (a_i - mean_d) / (std_d + eps) over the episodes of domain d in the batch.

    adv, domain_ids: [N]. A domain whose advantages are all equal (no signal) stays 0.
    """
    out = torch.zeros_like(adv)
    for d in domain_ids.unique():
        idx = domain_ids == d
        a = adv[idx]
        std = a.std(unbiased=False)
        out[idx] = (a - a.mean()) / (std + eps) if std > 0 else torch.zeros_like(a)
    return out


def episode_advantages(episodes: list[Episode], estimator: str = "grpo", by_domain: bool = False) -> list[float]:
    rewards = torch.tensor([e.reward for e in episodes], dtype=torch.float)
    groups = torch.tensor([e.group_id for e in episodes])
    adv = get_advantage(estimator)(rewards, groups)
    if by_domain:
        names = {d: i for i, d in enumerate(sorted({e.domain for e in episodes}))}
        adv = domain_normalized(adv, torch.tensor([names[e.domain] for e in episodes]))
    return adv.tolist()


def group_stats(episodes: list[Episode]) -> dict[str, float]:
    """Share of groups with no reward variance (they carry no learning signal)."""
    by_group: dict[int, list[float]] = defaultdict(list)
    for e in episodes:
        by_group[e.group_id].append(e.reward)
    flat = sum(1 for r in by_group.values() if max(r) == min(r))
    return {"zero_variance_groups": flat / max(1, len(by_group))}
