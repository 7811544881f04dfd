"""Straggler hedges: none until a domain's median is known, one per straggler up to the
cap, none while a batch is ready, and fixed over-provisioning when the factor is 0."""

from posttrain.rollout.hedge import MIN_SEEN, StragglerHedge


def test_hedges_follow_stragglers():
    h = StragglerHedge(factor=2.0, cap=3)
    for uid in range(MIN_SEEN):          # eight groups of 1 s: the median is 1 s
        h.issued(uid, "a", 0.0)
        h.finished(uid, 1.0)
    for uid in range(10, 15):
        h.issued(uid, "a", 10.0)
    h.issued(20, "b", 10.0)              # domain b has no median yet: never a straggler
    assert h.hedges(11.5) == 0           # in flight 1.5 s < 2 x 1 s
    assert h.hedges(12.5) == 3           # five stragglers, capped at 3
    assert h.hedges(12.5, batch_ready=True) == 0
    for uid in range(10, 14):
        h.finished(uid, 12.6)
    assert h.hedges(12.7) == 1
    assert StragglerHedge(factor=0.0, cap=4).hedges(0.0) == 4


def test_the_next_straggler_is_known_ahead():
    h = StragglerHedge(factor=2.0, cap=4)
    assert h.next_straggler_in(0.0) is None            # no median yet: nobody straggles
    for uid in range(MIN_SEEN):
        h.issued(uid, "a", 0.0)
        h.finished(uid, 1.0)                           # median 1 s: straggler after 2 s
    h.issued(100, "a", 10.0)
    h.issued(101, "a", 10.5)
    assert abs(h.next_straggler_in(11.0) - 1.0) < 1e-9
    assert abs(h.next_straggler_in(12.2) - 0.3) < 1e-9  # 100 is late already: 101 is next
    assert h.next_straggler_in(13.0) is None


def test_idle_workers_wake_for_the_next_straggler_only_while_the_trainer_waits():
    import time
    from types import SimpleNamespace

    from posttrain.rollout.config import RolloutConfig
    from posttrain.rollout.rollout_loop import RolloutLoop

    h = StragglerHedge(factor=1.0, cap=4)
    now = time.perf_counter()
    for uid in range(MIN_SEEN):
        h.issued(uid, "a", now - 1.0)
        h.finished(uid, now)                       # median 1 s
    h.issued(100, "a", now - 0.8)                  # a straggler in about 0.2 s
    loop = SimpleNamespace(cfg=RolloutConfig(groups_per_step=2, hedge_after=1.0), buffer=[], hedge=h)
    assert 0.1 < RolloutLoop._poll_s(loop) <= 0.2
    loop.buffer = [object(), object()]             # a batch is ready: no hedge, no need to wake
    assert RolloutLoop._poll_s(loop) == 0.5
    loop.cfg, loop.buffer = RolloutConfig(groups_per_step=2, hedge_after=0.0), []
    assert RolloutLoop._poll_s(loop) == 0.5
