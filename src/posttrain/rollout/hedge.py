"""Over-provisioning as hedges for stragglers: extra groups are issued only while groups
are in flight for longer than `factor` times their domain's median group time.

A fixed over-provisioning of k groups keeps (s + 1) * B + k groups outstanding. When the
trainer keeps up, each group then waits about s + 1 + k / B steps, past the staleness
bound, so about k / ((s + 1) * B + k) of all groups are dropped as stale (a third at
s = 1, k = B). A hedge instead stands in for one straggler, as MapReduce's backup tasks
do: the trainer takes it in the straggler's place, and nothing extra is in flight while
no group straggles. Nor while the buffer already holds a batch: the trainer is then not
waiting, and a hedge would only queue behind the batch and go stale. The median is over the domain's last WINDOW finished groups (issue to
finish); until a domain has MIN_SEEN of them, its groups never count as stragglers.
"""

from __future__ import annotations

import statistics
from collections import deque

WINDOW = 64
MIN_SEEN = 8


class StragglerHedge:
    def __init__(self, factor: float, cap: int):
        self.factor, self.cap = factor, cap
        self.started: dict[int, tuple[str, float]] = {}   # uid -> (domain, issue time)
        self.seen: dict[str, deque] = {}
        self.threshold: dict[str, float] = {}             # domain -> straggler after (s)

    def issued(self, uid: int, domain: str, now: float) -> None:
        self.started.setdefault(uid, (domain, now))

    def finished(self, uid: int, now: float) -> None:
        """A group came back (trained, filtered or to be retried): its time is counted."""
        domain, t0 = self.started.pop(uid, ("", now))
        if not domain:
            return
        seen = self.seen.setdefault(domain, deque(maxlen=WINDOW))
        seen.append(now - t0)
        if len(seen) >= MIN_SEEN:
            self.threshold[domain] = self.factor * statistics.median(seen)

    def forget(self, uid: int) -> None:
        self.started.pop(uid, None)

    def next_straggler_in(self, now: float) -> float | None:
        """Seconds until the next group in flight turns straggler (None: none will)."""
        waits = [t0 + self.threshold[d] - now for d, t0 in self.started.values() if d in self.threshold]
        return min((w for w in waits if w > 0), default=None)

    def hedges(self, now: float, batch_ready: bool = False) -> int:
        """Extra groups that may be in flight now: one per straggler, at most `cap`."""
        if self.factor <= 0:
            return self.cap
        if batch_ready:
            return 0
        late = sum(1 for d, t0 in self.started.values()
                   if d in self.threshold and now - t0 > self.threshold[d])
        return min(self.cap, late)
