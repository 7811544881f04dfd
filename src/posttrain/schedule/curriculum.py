"""The curriculum: which task of a domain runs next, weighted by how much it can teach.

A GRPO group of G attempts teaches nothing when all G rewards are equal. With pass rate p
that happens with probability p^G + (1-p)^G, so a task is drawn with weight
w(p) = 1 - p^G - (1-p)^G (at least `floor`, so that a too-hard task is still tried now and
then and can be seen to become learnable). p starts from the validation manifest's solve
rate (pass@1 over k episodes, worth `prior_strength` episodes) and follows the rewards seen
in training, older ones decayed by `decay` at each new group. Tasks whose episodes keep
ending in verifier or infrastructure errors are quarantined (weight 0) and reported.
Weights are integers in a SumTree: a draw and an update are O(log n) and exact.
"""

from __future__ import annotations

from dataclasses import dataclass

from posttrain.schedule.sumtree import SumTree

SCALE = 1 << 20            # integer weight of w = 1
NO_VERDICT = ("verifier_error", "verifier_timeout", "infra_error")


@dataclass(frozen=True)
class CurriculumKnobs:
    group_size: int = 4
    decay: float = 0.8             # weight of a task's earlier counts when a new group lands
    floor: float = 0.05            # least weight of a usable task
    prior_strength: float = 4.0    # episodes the manifest's pass rate counts for
    quarantine_after: int = 2      # groups in a row that are mostly errors
    easy: float = 0.9              # bands: p >= easy is too easy, p <= hard too hard
    hard: float = 0.1


def group_signal(p: float, g: int) -> float:
    """Probability that g attempts at pass rate p do not all get the same reward."""
    return max(0.0, 1.0 - p ** g - (1.0 - p) ** g)


class Curriculum:
    """Weighted draws over one domain's usable tasks (local indices 0..n-1)."""

    def __init__(self, n: int, usable: list[int], priors: dict[int, tuple[float, float]],
                 knobs: CurriculumKnobs):
        self.knobs = knobs
        self.usable = set(usable)
        self.succ = [0.5] * n   # decayed successes and episodes; (0.5, 1) = p 0.5, unknown
        self.eps = [1.0] * n
        k = knobs.prior_strength
        for i, (c, m) in priors.items():
            if m > 0:
                self.succ[i], self.eps[i] = k * c / m, k
        self.errors = [0] * n
        self.quarantined: dict[int, str] = {}
        self.touched: set[int] = set()
        self.tree = SumTree([self._weight(i) for i in range(n)])

    def pass_rate(self, i: int) -> float:
        return self.succ[i] / self.eps[i] if self.eps[i] > 0 else 0.5

    def _weight(self, i: int) -> int:
        if i not in self.usable or i in self.quarantined:
            return 0
        w = max(self.knobs.floor, group_signal(self.pass_rate(i), self.knobs.group_size))
        return max(1, int(w * SCALE))

    def pick(self, u: float) -> int | None:
        """The task for a uniform draw u in [0, 1); None if no task is left."""
        total = self.tree.total
        return self.tree.find(min(int(u * total), total - 1)) if total else None

    def observe(self, i: int, rewards: list[float], statuses: list[str]) -> str | None:
        """Count a finished group; returns a reason if the task was quarantined by it."""
        self.touched.add(i)
        scored = [min(1.0, max(0.0, r)) for r, s in zip(rewards, statuses) if s not in NO_VERDICT]
        self.errors[i] = self.errors[i] + 1 if len(scored) * 2 < len(rewards) else 0
        d = self.knobs.decay
        self.succ[i] = d * self.succ[i] + sum(scored)
        self.eps[i] = d * self.eps[i] + len(scored)
        reason = None
        if self.errors[i] >= self.knobs.quarantine_after and i not in self.quarantined:
            reason = f"{self.errors[i]} groups in a row mostly {'/'.join(sorted(set(statuses)))}"
            self.quarantined[i] = reason
        self.tree.set(i, self._weight(i))
        return reason

    def band(self, i: int) -> str:
        p = self.pass_rate(i)
        return "too easy" if p >= self.knobs.easy else "too hard" if p <= self.knobs.hard else "learnable"

    def state_dict(self) -> dict:
        t = sorted(self.touched)
        return {"touched": t, "succ": [self.succ[i] for i in t], "eps": [self.eps[i] for i in t],
                "errors": [self.errors[i] for i in t],
                "quarantined": {str(i): r for i, r in self.quarantined.items()}}

    def load_state_dict(self, state: dict) -> None:
        for i, s, e, err in zip(state["touched"], state["succ"], state["eps"], state["errors"]):
            self.succ[i], self.eps[i], self.errors[i] = s, e, err
        self.touched = set(state["touched"])
        self.quarantined = {int(i): r for i, r in state["quarantined"].items()}
        self.tree = SumTree([self._weight(i) for i in range(len(self.succ))])
