"""Group-relative advantages: each episode's reward against its group's (GRPO)."""

from __future__ import annotations

from collections import defaultdict

import torch

from posttrain.types import Episode


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


def episode_advantages(episodes: list[Episode]) -> list[float]:
    rewards = torch.tensor([e.reward for e in episodes], dtype=torch.float)
    groups = torch.tensor([e.group_id for e in episodes])
    return group_normalized(rewards, groups).tolist()


def group_stats(episodes: list[Episode]) -> dict[str, float]:
    """Share of groups with no reward variance (they carry no learning signal)."""
    by_group: dict[int, list[float]] = defaultdict(list)
    for e in episodes:
        by_group[e.group_id].append(e.reward)
    flat = sum(1 for r in by_group.values() if max(r) == min(r))
    return {"zero_variance_groups": flat / max(1, len(by_group))}
