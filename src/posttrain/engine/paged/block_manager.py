"""Paged KV bookkeeping: fixed-size blocks, ref counts, copy-on-write, hash-chained prefix cache.

Callers ask, then commit: `can_allocate`/`allocate`/`free` for a whole sequence,
`can_append`/`append` before writing more tokens. A full block's hash chains its parent's
hash with its own tokens (vLLM's automatic prefix caching); freed hashed blocks stay
reusable in LRU order until their slot is needed.
"""

from __future__ import annotations

from collections import OrderedDict, deque

from posttrain.engine.paged.sequence import Sequence


def chain_hash(parent: int | None, tokens: list[int]) -> int:
    """Hash of a full block given its parent's hash: equal iff the whole prefix is equal."""
    return hash((parent, tuple(tokens)))


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True):
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.caching = enable_prefix_caching
        self.ref_count = [0] * num_blocks
        self.block_hash: list[int | None] = [None] * num_blocks
        self.hash_to_block: dict[int, int] = {}
        self.free_ids: deque[int] = deque(range(num_blocks))
        self.evictable: OrderedDict[int, None] = OrderedDict()  # ref 0 but hashed, LRU first
        self.hit_tokens = 0

    @property
    def num_free(self) -> int:
        return len(self.free_ids) + len(self.evictable)

    def blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    # ---- whole sequences -------------------------------------------------------------------

    def _cached_prefix(self, seq: Sequence) -> tuple[list[int], list[int]]:
        """Block ids and hashes of seq's leading full blocks found in the cache (not the last token)."""
        if not self.caching:
            return [], []
        ids, hashes, parent = [], [], None
        for i in range((len(seq.tokens) - 1) // self.block_size):
            h = chain_hash(parent, seq.tokens[i * self.block_size : (i + 1) * self.block_size])
            bid = self.hash_to_block.get(h)
            if bid is None:
                break
            ids.append(bid)
            hashes.append(h)
            parent = h
        return ids, hashes

    def can_allocate(self, seq: Sequence) -> bool:
        hits, _ = self._cached_prefix(seq)
        idle_hits = sum(1 for b in hits if self.ref_count[b] == 0)
        return self.blocks_for(len(seq.tokens)) - len(hits) + idle_hits <= self.num_free

    def allocate(self, seq: Sequence) -> None:
        """Give seq blocks for all its tokens, reusing cached full prefix blocks."""
        assert not seq.block_table, "sequence already holds blocks"
        hits, hashes = self._cached_prefix(seq)
        for bid in hits:
            self._take(bid)
        seq.block_table = hits + [self._new_block() for _ in range(self.blocks_for(len(seq.tokens)) - len(hits))]
        seq.block_hashes = hashes
        seq.num_computed = len(hits) * self.block_size
        seq.num_cached = seq.num_computed
        self.hit_tokens += seq.num_computed

    def free(self, seq: Sequence) -> None:
        """Drop seq's references; hashed blocks stay reusable (LRU), tail blocks evicted first.
        Unhashed blocks go to the front of the free list: the next allocation takes blocks
        whose memory is still in cache, not the pool's cold (or never touched) ones."""
        for bid in reversed(seq.block_table):
            self.ref_count[bid] -= 1
            if self.ref_count[bid] == 0:
                if self.block_hash[bid] is not None:
                    self.evictable[bid] = None
                else:
                    self.free_ids.appendleft(bid)
        seq.block_table = []
        seq.block_hashes = []

    def fork(self, parent: Sequence, child: Sequence) -> None:
        """child shares all of parent's blocks (a GRPO group stores its prompt once)."""
        for bid in parent.block_table:
            self.ref_count[bid] += 1
        child.block_table = list(parent.block_table)
        child.block_hashes = list(parent.block_hashes)
        child.num_computed = parent.num_computed
        child.num_cached = parent.num_cached

    # ---- growing a sequence -----------------------------------------------------------------

    def _needs_cow(self, seq: Sequence) -> bool:
        i = seq.num_computed // self.block_size
        return i < len(seq.block_table) and self.ref_count[seq.block_table[i]] > 1

    def can_append(self, seq: Sequence, n: int) -> bool:
        """Can seq write KV for n more tokens (positions num_computed .. num_computed+n-1)?"""
        extra = self.blocks_for(seq.num_computed + n) - len(seq.block_table)
        return max(extra, 0) + int(self._needs_cow(seq)) <= self.num_free

    def append(self, seq: Sequence, n: int) -> list[tuple[int, int]]:
        """Make room for n more tokens; returns (src, dst) block copies the KV cache must do."""
        copies = []
        if self._needs_cow(seq):
            i = seq.num_computed // self.block_size
            src, dst = seq.block_table[i], self._new_block()
            self.ref_count[src] -= 1
            seq.block_table[i] = dst
            copies.append((src, dst))
        while len(seq.block_table) < self.blocks_for(seq.num_computed + n):
            seq.block_table.append(self._new_block())
        return copies

    def register(self, seq: Sequence) -> None:
        """Hash seq's newly completed full blocks so later requests can reuse them."""
        if not self.caching:
            return
        full = min(seq.num_computed, len(seq.tokens)) // self.block_size
        for i in range(len(seq.block_hashes), full):
            parent = seq.block_hashes[-1] if seq.block_hashes else None
            h = chain_hash(parent, seq.tokens[i * self.block_size : (i + 1) * self.block_size])
            seq.block_hashes.append(h)
            bid = seq.block_table[i]
            if h not in self.hash_to_block and self.block_hash[bid] is None:
                self.block_hash[bid] = h
                self.hash_to_block[h] = bid

    def flush(self) -> None:
        """Forget every cached prefix (after a weight update the cached KV is stale)."""
        for bid in self.evictable:
            self.free_ids.appendleft(bid)
        self.evictable.clear()
        self.hash_to_block.clear()
        self.block_hash = [None] * self.num_blocks

    # ---- single blocks ----------------------------------------------------------------------

    def _take(self, bid: int) -> None:
        if self.ref_count[bid] == 0:
            del self.evictable[bid]
        self.ref_count[bid] += 1

    def _new_block(self) -> int:
        if self.free_ids:
            bid = self.free_ids.popleft()
        else:
            bid, _ = self.evictable.popitem(last=False)
            del self.hash_to_block[self.block_hash[bid]]
            self.block_hash[bid] = None
        self.ref_count[bid] = 1
        return bid

    def usage(self, seqs: list[Sequence]) -> tuple[int, int]:
        """(allocated token slots, used token slots) over the blocks that seqs hold."""
        used: dict[int, int] = {}
        for s in seqs:
            for i, bid in enumerate(s.block_table):
                fill = min(self.block_size, max(len(s.tokens) - i * self.block_size, 0))
                used[bid] = max(used.get(bid, 0), fill)
        return len(used) * self.block_size, sum(used.values())
