"""One pool of slots (sandboxes, engine seats) shared by kinds of work by priority.

Each kind has a priority and a quota (most slots it may hold). `can_acquire(kind)` asks,
`acquire(kind)` commits and returns a Lease, `release(lease)` gives the slot back. When
the pool is full, a kind of higher priority takes the slot of the newest lease of the
lowest lower-priority kind: that lease's `preempted` event is set, and its holder stops
the work, releases, and queues it again (training rollouts preempt evaluation, which
resumes later; nothing is scored twice or lost, because only finished work is recorded).
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Lease:
    kind: str
    id: int
    preempted: threading.Event = field(default_factory=threading.Event)


class PriorityPool:
    def __init__(self, slots: int, priorities: dict[str, int], quotas: dict[str, int] | None = None):
        if slots < 1:
            raise ValueError("a pool needs at least one slot")
        quotas = quotas or {}
        if bad := {k: q for k, q in quotas.items() if q < 1}:
            raise ValueError(f"a quota below 1 can never be met: {bad}")
        self.slots, self.priorities, self.quotas = slots, dict(priorities), quotas
        self._leases: dict[int, Lease] = {}
        self._ids = itertools.count()
        self._cond = threading.Condition()
        self.stats = Counter()

    def _held(self, kind: str) -> int:
        return sum(1 for x in self._leases.values() if x.kind == kind and not x.preempted.is_set())

    def _victim(self, kind: str) -> Lease | None:
        """The newest lease of the lowest-priority kind below `kind`, not yet preempted."""
        mine = self.priorities[kind]
        lower = [x for x in self._leases.values()
                 if self.priorities[x.kind] < mine and not x.preempted.is_set()]
        return max(lower, key=lambda x: (-self.priorities[x.kind], x.id), default=None)

    def _can(self, kind: str) -> bool:
        if self._held(kind) >= self.quotas.get(kind, self.slots):
            return False
        return len(self._leases) < self.slots

    def can_acquire(self, kind: str) -> bool:
        with self._cond:
            return self._can(kind)

    def acquire(self, kind: str, timeout: float | None = None) -> Lease | None:
        """A slot for `kind`, preempting lower-priority work if the pool is full; waits
        (up to timeout) while the kind is at its quota or nothing can be preempted."""
        with self._cond:
            asked = False
            while not self._can(kind):
                if (not asked and self._held(kind) < self.quotas.get(kind, self.slots)
                        and (victim := self._victim(kind)) is not None):
                    victim.preempted.set()   # its holder stops, releases, queues the work again
                    self.stats[f"preempted_{victim.kind}"] += 1
                    asked = True
                if not self._cond.wait(timeout):
                    return None
                asked = False
            lease = Lease(kind, next(self._ids))
            self._leases[lease.id] = lease
            self.stats[f"acquired_{kind}"] += 1
            return lease

    def release(self, lease: Lease) -> None:
        with self._cond:
            self._leases.pop(lease.id, None)
            self._cond.notify_all()

    def in_use(self, kind: str | None = None) -> int:
        with self._cond:
            return sum(1 for x in self._leases.values() if kind is None or x.kind == kind)
