"""Which domain the next group goes to, in O(log D): stride scheduling over the shares.

Domain d has a virtual time `(outstanding_d - carry_d + 1) / share_d`: when, in groups
issued, it is due its next one. The domain with the smallest virtual time is the one
furthest below its share, so it goes next (ties: higher priority, then name). Issued
groups count until they are trained or returned, so a domain whose groups are filtered
or go stale is issued more; `carry_d` is what short batches still owe it
(schedule/shares.py). A MinTree holds one key per domain: a pick reads the root and an
issue, finish or return updates one leaf; only a settled batch, which changes every
carry, rebuilds the tree (O(D), once per training step).

Quotas take a domain out of the running (key INF): `max_groups` while that many are in
flight, `tokens_per_s` while its last TOKEN_WINDOW_S seconds hold more tokens than the
rate allows; it comes back when the window has drained (a heap of wake-up times).
"""

from __future__ import annotations

import heapq
import time
from collections import Counter, deque

from posttrain.schedule.mintree import INF, MinTree
from posttrain.schedule.shares import ShareCarry

TOKEN_WINDOW_S = 10.0


class DomainQueue:
    def __init__(self, batch: ShareCarry, priority: dict[str, int],
                 max_groups: dict[str, int | None], tokens_per_s: dict[str, float | None]):
        self.batch = batch                      # the shares and what short batches still owe
        self.names = list(batch.shares)
        self.index = {d: i for i, d in enumerate(self.names)}
        self.priority = priority
        self.max_groups, self.tokens_per_s = max_groups, tokens_per_s
        self.outstanding: Counter = Counter()   # issued, not yet trained or returned
        self.in_flight: Counter = Counter()
        self.tokens = {d: deque() for d in self.names}   # (time, tokens) inside the window
        self.token_sum = Counter()
        self.paused: list[tuple[float, str]] = []        # (wake-up time, domain), a heap
        self.paused_names: set[str] = set()
        self.tree = MinTree(len(self.names))
        self.rebuild()

    # ---- keys --------------------------------------------------------------------------

    def _key(self, d: str) -> tuple:
        share = self.batch.shares[d]
        cap = self.max_groups[d]
        if share <= 0 or (cap is not None and self.in_flight[d] >= cap) or d in self.paused_names:
            return INF
        vtime = (self.outstanding[d] - self.batch.carry[d] + 1) / share
        return (round(vtime, 9), -self.priority[d], d)

    def _update(self, d: str) -> None:
        self.tree.set(self.index[d], self._key(d))

    def rebuild(self) -> None:
        self.tree.build([self._key(d) for d in self.names])

    # ---- picking -----------------------------------------------------------------------

    def pick(self) -> str | None:
        """The neediest domain under its quotas, or None while every domain is at one."""
        self._wake(time.monotonic())
        while (i := self.tree.argmin()) is not None:
            d = self.names[i]
            if not self._over_rate(d):
                return d
        return None

    def _over_rate(self, d: str) -> bool:
        """Whether d's token window is over its rate; if so it is paused until it drains."""
        rate = self.tokens_per_s[d]
        if rate is None:
            return False
        now, window, budget = time.monotonic(), self.tokens[d], rate * TOKEN_WINDOW_S
        while window and window[0][0] < now - TOKEN_WINDOW_S:
            self.token_sum[d] -= window.popleft()[1]
        if self.token_sum[d] <= budget:
            return False
        drained, wake = self.token_sum[d], now
        for t, n in window:  # the earliest time the window is back within budget
            drained, wake = drained - n, t + TOKEN_WINDOW_S
            if drained <= budget:
                break
        heapq.heappush(self.paused, (wake, d))
        self.paused_names.add(d)
        self._update(d)
        return True

    def _wake(self, now: float) -> None:
        while self.paused and self.paused[0][0] <= now:
            _, d = heapq.heappop(self.paused)
            self.paused_names.discard(d)
            self._update(d)

    # ---- bookkeeping -------------------------------------------------------------------

    def issued(self, d: str) -> None:
        self.in_flight[d] += 1
        self.outstanding[d] += 1
        self._update(d)

    def finished(self, d: str, tokens: int) -> None:
        self.in_flight[d] -= 1
        if tokens:
            self.tokens[d].append((time.monotonic(), tokens))
            self.token_sum[d] += tokens
        self._update(d)

    def requeued(self, d: str) -> None:
        self.in_flight[d] -= 1
        self.outstanding[d] -= 1
        self._update(d)

    def returned(self, d: str) -> None:
        self.outstanding[d] -= 1
        self._update(d)

    def settled(self, taken_by: Counter) -> None:
        self.outstanding.subtract(taken_by)
        self.rebuild()

    def load(self, outstanding: Counter) -> None:
        self.outstanding, self.in_flight = Counter(outstanding), Counter()
        self.rebuild()
