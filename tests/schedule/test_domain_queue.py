"""The domain choice: the tournament tree against a plain scan, stride scheduling's
shares with returns and settles, and the token-rate quota's pause and wake-up."""

import random
import time
from collections import Counter

import posttrain.schedule.domain_queue as dq
from posttrain.schedule.mintree import INF, MinTree
from posttrain.schedule.scheduler import DomainTasks, Scheduler


def test_mintree_matches_a_scan_under_random_updates():
    rng = random.Random(0)
    for n in (1, 2, 7, 64, 100):
        tree, keys = MinTree(n), [INF] * n
        tree.build(keys)
        assert tree.argmin() is None
        for _ in range(500):
            i = rng.randrange(n)
            keys[i] = INF if rng.random() < 0.2 else (rng.randint(0, 20), rng.random())
            tree.set(i, keys[i])
            live = [k for k in keys if k != INF]
            assert (tree.argmin() is None) == (not live)
            if live:
                assert keys[tree.argmin()] == min(live)


def test_shares_hold_with_returns_and_settled_batches():
    shares = {"a": 0.55, "b": 0.3, "c": 0.1, "d": 0.05}
    sched = Scheduler([DomainTasks(d, [f"{d}{i}" for i in range(9)], share=s) for d, s in shares.items()], 0)
    rng, issued, trained = random.Random(1), Counter(), Counter()
    for _ in range(200):
        batch = []
        while len(batch) < 20:
            job = sched.next()
            issued[job.domain] += 1
            sched.observe(job, [], [])
            if rng.random() < (0.5 if job.domain == "a" else 0.1):
                sched.returned(job)     # filtered: its domain is owed another
            else:
                batch.append(job)
        plan = sched.batch_plan(20)
        sched.settle(20, batch)
        trained.update(j.domain for j in batch)
        assert sum(plan.values()) == 20
    total = sum(trained.values())
    assert all(abs(trained[d] / total - s) < 0.01 for d, s in shares.items())
    assert issued["a"] / sum(issued.values()) > 0.6   # filtered more, so issued more


def test_a_domain_over_its_token_rate_pauses_and_comes_back(monkeypatch):
    monkeypatch.setattr(dq, "TOKEN_WINDOW_S", 0.3)
    ds = [DomainTasks("fast", ["f0"], share=0.5, tokens_per_s=10.0), DomainTasks("slow", ["s0"], share=0.5)]
    sched = Scheduler(ds, seed=0)
    job = sched.next()
    assert job.domain == "fast"
    sched.observe(job, [1.0, 0.0], ["ok", "ok"], tokens=100)   # 100 tokens > 10/s * 0.3 s
    assert {sched.next().domain for _ in range(4)} == {"slow"}
    time.sleep(0.35)
    assert any(sched.next().domain == "fast" for _ in range(4))
