"""Prefix-affine routing with a load guard: a request whose prompt extends one seen before
(the next turn of an episode, the rest of a group) goes to the replica that served it, where
its prefix is cached, unless that replica carries more than `slack_tokens` outstanding tokens
above the least loaded one. Pure consistent hashing has no such guard and can collapse
the cache hit rate under skew (REFERENCES §8)."""

from __future__ import annotations

from collections import OrderedDict

_MOD = (1 << 61) - 1
_BASE = 1_000_003


def prefix_hashes(prompt: list[int]) -> list[int]:
    """h[l] = polynomial hash of prompt[:l], for l = 0..len(prompt)."""
    h = [0] * (len(prompt) + 1)
    for i, tok in enumerate(prompt):
        h[i + 1] = (h[i] * _BASE + tok + 1) % _MOD
    return h


class AffinityRouter:
    def __init__(self, slack_tokens: int = 4096, capacity: int = 100_000):
        self.slack_tokens = slack_tokens
        self.capacity = capacity
        self._owner: OrderedDict[tuple[int, int], int] = OrderedDict()  # (length, hash) -> replica
        self._turn = 0

    def owner_of(self, hashes: list[int], live: set[int]) -> int | None:
        """The live replica that served the longest earlier prompt this one extends."""
        for length in range(len(hashes) - 1, 0, -1):
            owner = self._owner.get((length, hashes[length]))
            if owner is not None and owner in live:
                return owner
        return None

    def choose(self, prompt: list[int], load: dict[int, int]) -> int:
        """A replica among load's keys (the live ones) for this prompt; remembers the choice."""
        live = set(load)
        if not live:
            raise ValueError("no live replica")
        hashes = prefix_hashes(prompt)
        owner = self.owner_of(hashes, live)
        low = min(load.values())
        if owner is None or load[owner] > low + self.slack_tokens:
            idle = sorted(i for i in live if load[i] == low)
            owner = idle[self._turn % len(idle)]  # rotate among equals: new episodes spread
            self._turn += 1
        key = (len(prompt), hashes[-1])
        self._owner[key] = owner
        self._owner.move_to_end(key)
        while len(self._owner) > self.capacity:
            self._owner.popitem(last=False)
        return owner

    def forget(self, replica: int) -> None:
        """A dead replica's cache is gone: its prompts are routed afresh."""
        for key in [k for k, v in self._owner.items() if v == replica]:
            del self._owner[key]
