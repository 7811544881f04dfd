"""Per-step numbers of the RL pipeline: rewards and statuses of the trained episodes, the
staleness histogram of their tokens, partial rollouts, and idle fractions of both loops."""

from __future__ import annotations

from collections import Counter

from posttrain.agent.stats import tool_stats
from posttrain.types import Episode


def episode_stats(episodes: list[Episode]) -> dict[str, float]:
    n = max(1, len(episodes))
    rewards = [e.reward for e in episodes]
    mean = sum(rewards) / n
    out = {"reward_mean": mean,
           "reward_std": (sum((r - mean) ** 2 for r in rewards) / n) ** 0.5,
           "pass_rate": sum(r >= 1.0 for r in rewards) / n,
           "tokens_out_mean": sum(e.tokens_out for e in episodes) / n,
           "turns_mean": sum(len(e.turns) for e in episodes) / n,
           "episodes": float(len(episodes))}
    for status, count in Counter(e.status for e in episodes).items():
        out[f"status_{status}"] = count / n
    return out | tool_stats(episodes)


def domain_stats(groups) -> dict[str, float]:
    """Per-domain numbers (`d/<domain>/...`) of a batch whose groups span several domains:
    reward, pass rate, tokens, episode wall time, status counts, groups."""
    by_domain: dict[str, list] = {}
    for g in groups:
        by_domain.setdefault(g.job.domain, []).append(g)
    if set(by_domain) <= {"default"}:
        return {}
    out = {}
    for name, gs in sorted(by_domain.items()):
        eps = [e for g in gs for e in g.episodes]
        n = max(1, len(eps))
        pre = f"d/{name}/"
        out[pre + "groups"] = float(len(gs))
        out[pre + "reward_mean"] = sum(e.reward for e in eps) / n
        out[pre + "pass_rate"] = sum(e.reward >= 1.0 for e in eps) / n
        out[pre + "tokens_out_mean"] = sum(e.tokens_out for e in eps) / n
        out[pre + "episode_s_mean"] = sum(sum(e.timings.values()) for e in eps) / n
        for status, count in Counter(e.status for e in eps).items():
            out[pre + f"status_{status}"] = float(count)
    return out


def staleness_stats(episodes: list[Episode], version: int, max_staleness: int) -> dict[str, float]:
    """Token staleness = trainer version - the version that sampled the token.

    staleness_hist_k is the share of model tokens k versions old; partial_rollout_frac the
    share of episodes whose tokens came from more than one version.
    """
    ages = Counter()
    partial = 0
    for e in episodes:
        sampled = e.sampled_versions()
        partial += len(set(sampled)) > 1
        ages.update(version - v for v in sampled)
    total = max(1, sum(ages.values()))
    out = {f"staleness_hist_{k}": ages.get(k, 0) / total for k in range(max_staleness + 1)}
    out["staleness_mean"] = sum(k * c for k, c in ages.items()) / total
    out["staleness_max"] = float(max(ages, default=0))
    out["partial_rollout_frac"] = partial / max(1, len(episodes))
    return out


class IdleClock:
    """Tracks when at least one rollout wave is running, to report the sampler's idle share."""

    def __init__(self, now: float):
        self.active, self.busy_total, self.since = 0, 0.0, now

    def start(self, now: float) -> None:
        if self.active == 0:
            self.since = now
        self.active += 1

    def stop(self, now: float) -> None:
        self.active -= 1
        if self.active == 0:
            self.busy_total += now - self.since

    def busy(self, now: float) -> float:
        return self.busy_total + (now - self.since if self.active else 0.0)
