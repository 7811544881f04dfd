"""A Fenwick tree of integer weights: draw an index in proportion to its weight, and
change one weight, both in O(log n). Integer weights keep sums exact, so a tree rebuilt
from a checkpoint draws exactly what the tree it replaced would have drawn."""

from __future__ import annotations


class SumTree:
    def __init__(self, weights: list[int]):
        self.n = len(weights)
        self.weights = [0] * self.n
        self.tree = [0] * (self.n + 1)
        for i, w in enumerate(weights):  # O(n) build: each node passes its sum to its parent
            self.weights[i] = w
            self.tree[i + 1] += w
            parent = (i + 1) + ((i + 1) & -(i + 1))
            if parent <= self.n:
                self.tree[parent] += self.tree[i + 1]
        self.top = 1 << max(0, self.n.bit_length() - 1) if self.n else 0

    @property
    def total(self) -> int:
        s, i = 0, self.n
        while i > 0:
            s, i = s + self.tree[i], i - (i & -i)
        return s

    def set(self, index: int, weight: int) -> None:
        delta = weight - self.weights[index]
        self.weights[index] = weight
        i = index + 1
        while i <= self.n:
            self.tree[i] += delta
            i += i & -i

    def find(self, target: int) -> int:
        """The index i with prefix(i) <= target < prefix(i + 1), for 0 <= target < total."""
        pos, step = 0, self.top
        while step:
            nxt = pos + step
            if nxt <= self.n and self.tree[nxt] <= target:
                pos, target = nxt, target - self.tree[nxt]
            step >>= 1
        return pos
