"""A tournament tree over a fixed set of slots: the slot with the smallest key in O(1),
one slot's key changed in O(log n). The scheduler keeps one leaf per domain, so choosing
the neediest domain never scans the domains."""

from __future__ import annotations

import math

INF = (math.inf,)


class MinTree:
    def __init__(self, n: int):
        self.size = 1 << max(0, (n - 1).bit_length())
        self.n = n
        self.keys: list[tuple] = [INF] * n
        self.best = [-1] * (2 * self.size)   # node -> leaf index of its subtree's minimum

    def _key(self, leaf: int) -> tuple:
        return INF if leaf < 0 else self.keys[leaf]

    def set(self, leaf: int, key: tuple) -> None:
        """Change one leaf's key (INF takes it out of the running)."""
        self.keys[leaf] = key
        node = self.size + leaf
        self.best[node] = leaf
        node >>= 1
        while node:
            a, b = self.best[2 * node], self.best[2 * node + 1]
            self.best[node] = a if self._key(a) <= self._key(b) else b
            node >>= 1

    def build(self, keys: list[tuple]) -> None:
        """Set every key at once, O(n)."""
        self.keys = list(keys)
        for i in range(self.size):
            self.best[self.size + i] = i if i < self.n else -1
        for node in range(self.size - 1, 0, -1):
            a, b = self.best[2 * node], self.best[2 * node + 1]
            self.best[node] = a if self._key(a) <= self._key(b) else b

    def argmin(self) -> int | None:
        """The leaf with the smallest key, or None if every key is INF."""
        leaf = self.best[1]
        return None if leaf < 0 or self.keys[leaf] == INF else leaf
