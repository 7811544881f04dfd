"""LockedEngine side by side (an agent program's one-prompt requests): generate calls run
together in an engine whose concurrent callers share steps, and a weight update waits until
none is in flight; without it, calls take turns as before."""

import copy
import threading
import time

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import LocalEngine
from posttrain.models.tiny import build_tiny_model
from posttrain.rollout.weights import LockedEngine

PARAMS = SamplingParams(max_tokens=6, seed=0)


class Watched(LocalEngine):
    """Counts the generate calls inside at once; `hold` keeps each call in until it is set."""

    def __init__(self, model):
        super().__init__(model)
        self.inside = self.most = 0
        self.count = threading.Lock()
        self.hold = threading.Event()
        self.hold.set()

    def generate(self, prompts, params):
        with self.count:
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            self.hold.wait(30)
            return super().generate(prompts, params)
        finally:
            with self.count:
                self.inside -= 1


def _calls(engine: LockedEngine, n: int, out: list | None = None) -> list[threading.Thread]:
    """n calls, each on its own thread; their completions' policy versions go to `out`."""
    out = [] if out is None else out
    threads = [threading.Thread(target=lambda i=i: out.append(
        engine.generate([[5 + i, 7, 9]], PARAMS)[0].policy_version)) for i in range(n)]
    for t in threads:
        t.start()
    return threads


def _wait_inside(inner: Watched, n: int) -> None:
    deadline = time.time() + 30
    while inner.inside < n and time.time() < deadline:
        time.sleep(0.01)


def test_side_by_side_calls_are_inside_together_and_an_update_waits_for_them():
    model = build_tiny_model(400, seed=0)
    inner = Watched(copy.deepcopy(model))
    engine = LockedEngine(inner, side_by_side=True)
    assert engine.concurrent
    inner.hold.clear()
    versions: list[int] = []
    threads = _calls(engine, 3, versions)
    _wait_inside(inner, 3)
    assert inner.most == 3                               # all three in the engine at once
    update = threading.Thread(target=engine.publish, args=(model, 1))
    update.start()
    update.join(3)
    assert update.is_alive() and inner.policy_version == 0   # waits for the calls in flight
    inner.hold.set()
    for t in [*threads, update]:
        t.join(30)
    assert versions == [0, 0, 0] and inner.policy_version == 1   # the calls in flight: old weights
    assert engine.generate([[5, 7, 9]], PARAMS)[0].policy_version == 1


def test_without_side_by_side_calls_take_turns():
    inner = Watched(build_tiny_model(400, seed=0))
    engine = LockedEngine(inner)
    assert not engine.concurrent
    for t in _calls(engine, 3):
        t.join(30)
    assert inner.most == 1
