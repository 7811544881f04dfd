"""The rollout engine behind a lock, so weight updates land between generate calls.

The trainer publishes new weights with `publish`; a generate call in flight finishes on
the old weights first. Multi-turn episodes therefore continue across an update (partial
rollouts): each turn's tokens carry the version they were sampled with. Side by side (an
engine whose concurrent callers share steps, asked to): generate calls run together, so many
agents' one-prompt requests batch, and an update waits until none is in flight.
"""

from __future__ import annotations

import contextlib
import threading
import time

from posttrain.engine.base import Engine, SamplingParams
from posttrain.train.lora import serving_state
from posttrain.types import Completion


class SharedLock:
    """Held by many at once (`shared`) or by one alone (`exclusive`)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._holders, self._alone = 0, False

    @contextlib.contextmanager
    def shared(self):
        with self._cond:
            self._cond.wait_for(lambda: not self._alone)
            self._holders += 1
        try:
            yield
        finally:
            with self._cond:
                self._holders -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self):
        with self._cond:
            self._cond.wait_for(lambda: not self._alone and self._holders == 0)
            self._alone = True
        try:
            yield
        finally:
            with self._cond:
                self._alone = False
                self._cond.notify_all()


class LockedEngine(Engine):
    def __init__(self, engine: Engine, side_by_side: bool = False):
        """side_by_side: generate calls run together where the engine shares its steps between
        concurrent callers (`shares_steps`): what agent programs' one-prompt requests need."""
        self.engine = engine
        self._side_by_side = side_by_side and engine.shares_steps
        self._lock = SharedLock()
        # A publish holds _turn while it waits for _lock, so generate calls that arrive
        # meanwhile queue behind it: a weight update never waits for a crowd of rollout threads.
        self._turn = threading.Lock()
        self._count_lock = threading.Lock()
        self.generate_s = 0.0  # time spent inside generate (the sampler's busy time)
        self.cores: set[int] | None = None  # the cores a pinned engine process computes on
        self._state: dict = {}
        self._state_key: tuple | None = None

    @property
    def policy_version(self) -> int:
        return self.engine.policy_version

    @property
    def concurrent(self) -> bool:
        """Callers may generate side by side (their calls batch)."""
        return self.engine.concurrent or self._side_by_side

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        # An engine server orders updates against its own calls (`concurrent`): callers go
        # side by side, so its batches fill; generate_s then sums overlapping calls.
        if self.engine.concurrent:
            return self._timed_generate(prompts, params)
        with self._turn:
            pass
        with self._lock.shared() if self._side_by_side else self._lock.exclusive():
            return self._timed_generate(prompts, params)

    def _timed_generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        t0 = time.perf_counter()
        try:
            return self.engine.generate(prompts, params)
        finally:
            with self._count_lock:
                self.generate_s += time.perf_counter() - t0

    def bind(self, fn) -> int:
        """Send `fn` to the engine's process once (ProcessEngine.bind); `run_beside` runs it."""
        return self.engine.bind(fn)

    def run_beside(self, handle: int, *args):
        """A function bound in the engine's process (ProcessEngine.bind), run there; the time
        its generate calls take counts as generation time."""
        with self._lock.exclusive():
            result, seconds = self.engine.call(handle, *args)
            self.generate_s += seconds
            return result

    def _state_of(self, model) -> dict:
        """model.state_dict(), built again only when a parameter was replaced: its tensors share
        storage with the parameters, which optimizers update in place. A model with LoRA
        adapters gives its merged weights, computed afresh (train/lora.py): engines serve the
        current policy without knowing of adapters."""
        merged = serving_state(model)
        if merged is not None:
            return merged
        ptrs = [p.data_ptr() for p in model.parameters()]
        if self._state_key != (id(model), ptrs):
            self._state, self._state_key = model.state_dict(), (id(model), ptrs)
        return self._state

    def publish_state(self, state: dict, version: int) -> None:
        """Copy a state dict in (a replica in another process receives weights this way)."""
        with self._lock.exclusive():
            self.engine.update_weights(state, version)

    def publish(self, model, version: int) -> None:
        """Copy the trainer's weights into the engine (unless it shares the model). An engine
        in another process takes them without waiting for the generate call in flight."""
        if self.engine.updates_while_generating:
            self.engine.update_weights(self._state_of(model), version)
            return
        with self._turn, self._lock.exclusive():
            if not self.engine.share_weights(model, version):
                self.engine.update_weights(self._state_of(model), version)
