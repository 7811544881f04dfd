"""The buffer between the rollout loop and the training loop.

It holds finished groups. `put` filters groups that carry no signal (all rewards
equal, or no episode that finished cleanly); `take` hands out the lowest-uid groups
whose oldest token is at most `max_staleness` versions behind, and drops the ones
that are older. Everything in it serialises to JSON for checkpoints.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from posttrain.schedule.sampler import GroupJob
from posttrain.types import Episode

# Episodes that ended for reasons outside the model's control are kept for metrics but
# never trained on: their reward says nothing about the policy.
NOT_TRAINED = ("verifier_error", "verifier_timeout", "infra_error")


@dataclass
class Group:
    job: GroupJob
    episodes: list[Episode]
    version_min: int = 0  # oldest policy version among the group's sampled tokens
    version_max: int = 0

    @classmethod
    def of(cls, job: GroupJob, episodes: list[Episode], fallback_version: int) -> Group:
        for e in episodes:
            e.domain = job.domain
        vs = [v for e in episodes for v in e.sampled_versions()]
        return cls(job, episodes, min(vs, default=fallback_version), max(vs, default=fallback_version))

    @property
    def uid(self) -> int:
        return self.job.uid

    @property
    def trainable(self) -> list[Episode]:
        return [e for e in self.episodes if e.status not in NOT_TRAINED]

    def has_signal(self) -> bool:
        rewards = [e.reward for e in self.trainable]
        return len(set(rewards)) > 1

    def to_dict(self) -> dict:
        return {"job": asdict(self.job), "episodes": [e.to_dict() for e in self.episodes],
                "version_min": self.version_min, "version_max": self.version_max}

    @classmethod
    def from_dict(cls, d: dict) -> Group:
        return cls(GroupJob(**d["job"]), [Episode.from_dict(e) for e in d["episodes"]],
                   d["version_min"], d["version_max"])


@dataclass
class BufferStats:
    filtered: int = 0  # zero-variance or failed groups thrown away at put
    dropped_stale: int = 0  # groups too old when the trainer came for them


@dataclass
class Buffer:
    groups: list[Group] = field(default_factory=list)
    stats: BufferStats = field(default_factory=BufferStats)

    def put(self, group: Group, need_signal: bool = True) -> bool:
        """Keep the group if it carries a learning signal (need_signal) or at least has an
        episode to train on; returns whether it was kept."""
        if not (group.has_signal() if need_signal else group.trainable):
            self.stats.filtered += 1
            return False
        self.groups.append(group)
        self.groups.sort(key=lambda g: g.uid)
        return True

    def drop_stale(self, version: int, max_staleness: int) -> list[Group]:
        """Remove and return groups whose oldest token is more than max_staleness versions old."""
        keep = [g for g in self.groups if version - g.version_min <= max_staleness]
        dropped = [g for g in self.groups if version - g.version_min > max_staleness]
        self.groups, self.stats.dropped_stale = keep, self.stats.dropped_stale + len(dropped)
        return dropped

    def can_take(self, n: int, plan: dict[str, int] | None = None) -> bool:
        """Whether n groups are here (and, with a plan, each domain's count of them)."""
        if plan is None:
            return len(self.groups) >= n
        have = Counter(g.job.domain for g in self.groups)
        return all(have[d] >= c for d, c in plan.items())

    def take(self, n: int, plan: dict[str, int] | None = None) -> list[Group]:
        """The n lowest-uid groups (call drop_stale first); with a plan, the lowest-uid
        plan[d] of each domain d, topped up from the rest if a domain is short."""
        if plan is None:
            out = self.groups[:n]
        else:
            left, out, rest = dict(plan), [], []
            for g in self.groups:  # lowest uid first
                if left.get(g.job.domain, 0) > 0:
                    left[g.job.domain] -= 1
                    out.append(g)
                else:
                    rest.append(g)
            out += rest[:max(0, n - len(out))]
        taken = {g.uid for g in out}
        self.groups = [g for g in self.groups if g.uid not in taken]
        return sorted(out, key=lambda g: g.uid)

    def __len__(self) -> int:
        return len(self.groups)

    def state_dict(self) -> dict:
        return {"groups": [g.to_dict() for g in self.groups], "stats": asdict(self.stats)}

    def load_state_dict(self, state: dict) -> None:
        self.groups = [Group.from_dict(g) for g in state["groups"]]
        self.stats = BufferStats(**state["stats"])
