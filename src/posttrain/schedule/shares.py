"""Exact domain shares: stratified rounding with the remainder carried from step to step.

Each step a batch of B groups is split between domains in proportion to their shares.
Rounding alone drifts (a 10% domain in batches of 4 would get 0 every step); carrying
what each domain was owed makes the running total exact: after n steps every domain has
had floor or ceil of n * B * share groups, never further off than one group.
"""

from __future__ import annotations

import logging
import math

log = logging.getLogger(__name__)


def normalise(shares: dict[str, float]) -> dict[str, float]:
    """Shares scaled to sum to 1; a sum off by more than 1e-6 is logged as a warning.
    Negative, non-finite or all-zero shares are refused (ValueError)."""
    if not shares:
        raise ValueError("no domains: at least one domain needs a share")
    bad = {k: v for k, v in shares.items() if not math.isfinite(v) or v < 0}
    if bad:
        raise ValueError(f"shares must be finite and >= 0: {bad}")
    total = sum(shares.values())
    if total <= 0:
        raise ValueError("every share is 0: nothing to schedule")
    if abs(total - 1.0) > 1e-6:
        log.warning("domain shares sum to %.6g, not 1: normalised", total)
    return {k: v / total for k, v in shares.items()}


def allocate(shares: dict[str, float], n: int, carry: dict[str, float]) -> tuple[dict[str, int], dict[str, float]]:
    """Split n slots between domains; returns (counts, new carry).

    owed_d = carry_d + n * share_d; each domain gets floor(owed_d), and the slots left
    over go to the largest fractional parts (ties by name, so the split is deterministic).
    carry'_d = owed_d - count_d stays in (-1, 1), and sums to 0.
    """
    owed = {d: carry.get(d, 0.0) + n * s for d, s in shares.items()}
    counts = {d: max(0, math.floor(o + 1e-9)) for d, o in owed.items()}
    left = n - sum(counts.values())
    by_remainder = sorted(owed, key=lambda d: (-(owed[d] - counts[d]), d))
    for d in by_remainder[:max(0, left)]:
        counts[d] += 1
    for d in reversed(by_remainder):  # a domain owed less than 0 was clamped: take it back
        if left >= 0:
            break
        if counts[d] > 0:
            counts[d], left = counts[d] - 1, left + 1
    return counts, {d: owed[d] - counts[d] for d in owed}


class ShareCarry:
    """The running state of `allocate`: one carried remainder per domain (checkpointed)."""

    def __init__(self, shares: dict[str, float]):
        self.shares = normalise(shares)
        self.carry = {d: 0.0 for d in self.shares}

    def plan(self, n: int) -> dict[str, int]:
        """What the next batch of n should hold (does not change the carry)."""
        return allocate(self.shares, n, self.carry)[0]

    def commit(self, n: int, actual: dict[str, int]) -> None:
        """A batch of n was taken with `actual` groups per domain: what each domain was owed
        and did not get (a short batch) stays owed."""
        for d, s in self.shares.items():
            self.carry[d] += n * s - actual.get(d, 0)

    def state_dict(self) -> dict:
        return {"carry": dict(self.carry)}

    def load_state_dict(self, state: dict) -> None:
        self.carry = {d: float(state["carry"].get(d, 0.0)) for d in self.shares}
