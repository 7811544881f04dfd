"""Block manager: paired verbs, ref counts, copy-on-write, hash-chained prefix cache with LRU."""

import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.block_manager import BlockManager
from posttrain.engine.paged.sequence import Sequence


def seq(tokens):
    return Sequence(list(tokens), SamplingParams(), torch.Generator())


def test_allocate_free_round_trip():
    bm = BlockManager(num_blocks=8, block_size=4)
    s = seq(range(10))
    assert bm.can_allocate(s)
    bm.allocate(s)
    assert len(s.block_table) == 3 and bm.num_free == 5
    bm.free(s)
    assert bm.num_free == 8 and s.block_table == []


def test_freed_blocks_are_reused_first_and_untouched_ones_last():
    """Most recently freed first: a run keeps reusing a few warm blocks instead of walking
    the whole (cold, possibly never touched) pool."""
    bm = BlockManager(num_blocks=64, block_size=4, enable_prefix_caching=False)
    a = seq(range(6))
    bm.allocate(a)
    held = list(a.block_table)
    bm.free(a)
    for _ in range(3):
        b = seq(range(7))
        bm.allocate(b)
        assert sorted(b.block_table) == sorted(held)
        bm.free(b)


def test_cannot_allocate_beyond_capacity():
    bm = BlockManager(num_blocks=2, block_size=4)
    assert not bm.can_allocate(seq(range(9)))


def test_fork_shares_blocks_and_copies_partial_block_on_write():
    bm = BlockManager(num_blocks=8, block_size=4)
    parent, child = seq(range(6)), seq(range(6))
    bm.allocate(parent)
    parent.num_computed = 6
    bm.fork(parent, child)
    assert child.block_table == parent.block_table and bm.num_free == 6
    assert bm.ref_count[parent.block_table[1]] == 2
    copies = bm.append(child, 1)  # writes position 6, inside the shared partial block 1
    assert copies == [(parent.block_table[1], child.block_table[1])]
    assert child.block_table[0] == parent.block_table[0]  # full block stays shared
    assert bm.ref_count[parent.block_table[1]] == 1 and bm.ref_count[child.block_table[1]] == 1


def test_prefix_cache_reuses_full_blocks_by_chained_hash():
    bm = BlockManager(num_blocks=16, block_size=4)
    a = seq(range(13))
    bm.allocate(a)
    a.num_computed = 13
    bm.register(a)
    a_table = list(a.block_table)
    bm.free(a)  # hashed blocks stay cached (evictable) after free
    b = seq(list(range(8)) + [99, 98, 97, 96, 95])
    bm.allocate(b)
    assert b.num_computed == 8 and b.block_table[:2] == a_table[:2]
    c = seq([7] + list(range(1, 13)))  # differs in block 0: chain breaks at once
    bm.allocate(c)
    assert c.num_computed == 0


def test_last_token_is_always_recomputed():
    bm = BlockManager(num_blocks=16, block_size=4)
    a = seq(range(8))
    bm.allocate(a)
    a.num_computed = 8
    bm.register(a)
    bm.free(a)
    b = seq(range(8))
    bm.allocate(b)
    assert b.num_computed == 4  # block 1 holds the last token: computed again for logits


def test_lru_evicts_oldest_cached_block_first():
    bm = BlockManager(num_blocks=4, block_size=2)
    old, new = seq([1, 2, 3]), seq([5, 6, 7])
    for s in (old, new):
        bm.allocate(s)
        s.num_computed = 3
        bm.register(s)
        bm.free(s)
    assert len(bm.hash_to_block) == 2
    bm.allocate(seq(range(20, 27)))  # needs all 4 blocks: both cached ones are evicted
    assert len(bm.hash_to_block) == 0


def test_flush_forgets_prefixes():
    bm = BlockManager(num_blocks=8, block_size=2)
    a = seq([1, 2, 3, 4, 5])
    bm.allocate(a)
    a.num_computed = 5
    bm.register(a)
    bm.free(a)
    bm.flush()
    b = seq([1, 2, 3, 4, 5])
    bm.allocate(b)
    assert b.num_computed == 0 and bm.num_free == 8 - 3


def test_usage_counts_shared_blocks_once():
    bm = BlockManager(num_blocks=8, block_size=4)
    p, c = seq(range(6)), seq(range(6))
    bm.allocate(p)
    p.num_computed = 6
    bm.fork(p, c)
    assert bm.usage([p, c]) == (8, 6)
