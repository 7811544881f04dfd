"""A discrete-event model of the RL pipeline (rollout/pipeline.py), to predict what a
configuration does before spending a cluster on it.

Groups are issued under the pipeline's rule (taken + outstanding within
(version + 1 + max_staleness) * B + overprovision, at most `workers` in flight). A group
first generates on one of `engines` (first come, first served: the engine serialises
generate calls), then verifies in a sandbox slot, its G episodes side by side (the group's
verify time is the slowest of G draws). The trainer takes B finished groups, trains for
`train_s` and publishes for `sync_s`; the version then rises and groups older than the
bound (plus `carry_staleness`, partial rollouts) are dropped. With `hedge_after`, the
over-provisioned groups are issued only as hedges, one per group in flight longer than
hedge_after x its domain's median group time, as the pipeline does (rollout/hedge.py). With max_staleness 0 the pipeline runs synchronous waves instead: the
trainer issues B + overprovision groups, waits for all, trains.
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Costs:
    """What one run measured: per-group generation seconds, per-episode verify seconds by
    domain (samples to draw from), the train step and the weight sync."""

    gen_s: list[float]
    verify_s: dict[str, list[float]]
    train_s: float
    sync_s: float = 0.0
    tokens_per_group: float = 1.0
    pass_rate: float = 0.5        # for the zero-variance filter

    def draw_verify(self, rng: random.Random, domain: str, g: int) -> float:
        samples = self.verify_s[domain]
        return max(rng.choice(samples) for _ in range(g))


@dataclass(frozen=True)
class SimConfig:
    steps: int = 50
    groups_per_step: int = 8
    group_size: int = 4
    max_staleness: int = 1
    overprovision: int = 0
    workers: int = 8
    engines: int = 1
    sandbox_slots: int | None = None     # episodes verifying at once; None = unlimited
    shares: dict[str, float] = field(default_factory=lambda: {"default": 1.0})
    filter_zero_variance: bool = False
    train_scale: float = 1.0             # train_s divides by this (more trainer ranks)
    gen_scale: float = 1.0               # gen_s divides by this (faster engines)
    # Engine and trainer share one interpreter (the in-process engine on CPU): each runs
    # slower by (1 + the other's busy share). Off for engines and trainers on their own devices.
    shared_cpu: bool = False
    hedge_after: float = 0.0             # > 0: over-provisioned groups only as straggler hedges
    carry_staleness: int = 0             # partial rollouts: trained up to max_staleness + this old


@dataclass
class SimResult:
    wall_s: float
    trained_groups: int
    trainer_idle_frac: float
    throughput: float                    # trained groups per second (after the first step)
    wasted_token_frac: float
    steps: int
    engine_busy_frac: float = 0.0

    def as_dict(self) -> dict:
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in self.__dict__.items()}


class _Sim:
    def __init__(self, costs: Costs, cfg: SimConfig, seed: int):
        self.c, self.cfg, self.rng = costs, cfg, random.Random(seed)
        self.now, self.events, self.seq = 0.0, [], 0
        self.engine_free = [0.0] * cfg.engines
        self.slots_free = [0.0] * max(1, cfg.sandbox_slots // cfg.group_size) if cfg.sandbox_slots else None
        self.version = self.taken = self.in_flight = self.steps = 0
        self.buffer: list[int] = []           # versions the buffered groups were issued at
        self.training = False
        self.generated = self.wasted = self.gen_busy = 0.0
        self.gen_factor = self.train_factor = 1.0   # contention slow-downs (shared_cpu)
        self.idle_s, self.idle_since, self.first_step_end = 0.0, 0.0, None
        self.domains = list(cfg.shares)
        self.owed = {d: 0.0 for d in self.domains}
        self.started: dict[int, tuple[float, str]] = {}     # in-flight group -> (issue time, domain)
        self.seen = {d: deque(maxlen=64) for d in self.domains}
        self.uid = 0

    def _push(self, t: float, kind: str, data=None) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, data))

    def _domain(self) -> str:
        for d in self.domains:
            self.owed[d] += self.cfg.shares[d]
        d = max(self.domains, key=lambda x: (self.owed[x], x))
        self.owed[d] -= 1.0
        return d

    def _finish_time(self, start: float, domain: str) -> float:
        """When a group issued at `start` is done: engine queue, generation, then a slot."""
        i = min(range(len(self.engine_free)), key=self.engine_free.__getitem__)
        service = self.rng.choice(self.c.gen_s) / self.cfg.gen_scale * self.gen_factor
        self.gen_busy += service
        gen_end = max(start, self.engine_free[i]) + service
        self.engine_free[i] = gen_end
        verify = self.c.draw_verify(self.rng, domain, self.cfg.group_size)
        if self.slots_free is None:
            return gen_end + verify
        j = min(range(len(self.slots_free)), key=self.slots_free.__getitem__)
        end = max(gen_end, self.slots_free[j]) + verify
        self.slots_free[j] = end
        return end

    def _start(self) -> None:
        domain, self.uid = self._domain(), self.uid + 1
        self.in_flight += 1
        self.started[self.uid] = (self.now, domain)
        self._push(self._finish_time(self.now, domain), "done", (self.version, self.uid))
        if self.cfg.hedge_after > 0 and len(self.seen[domain]) >= 8:  # wake when it would straggle
            self._push(self.now + self._threshold(domain) + 1e-9, "straggle")

    def _threshold(self, domain: str) -> float:
        return self.cfg.hedge_after * statistics.median(self.seen[domain])

    def _hedges(self) -> int:
        cfg = self.cfg
        if cfg.hedge_after <= 0:
            return cfg.overprovision
        if len(self.buffer) >= cfg.groups_per_step:   # the trainer is not waiting
            return 0
        late = sum(1 for t0, d in self.started.values()
                   if len(self.seen[d]) >= 8 and self.now - t0 > self._threshold(d))
        return min(cfg.overprovision, late)

    def _issue(self) -> None:
        cfg = self.cfg
        limit = (self.version + 1 + cfg.max_staleness) * cfg.groups_per_step + self._hedges()
        while (self.in_flight < cfg.workers
               and self.taken + self.in_flight + len(self.buffer) < limit):
            self._start()

    def _signal(self) -> bool:
        p, g = self.c.pass_rate, self.cfg.group_size
        return self.rng.random() >= p ** g + (1 - p) ** g

    def on_done(self, data: tuple[int, int]) -> None:
        version, uid = data
        t0, domain = self.started.pop(uid)
        self.seen[domain].append(self.now - t0)
        self.in_flight -= 1
        self.generated += self.c.tokens_per_group
        if self.cfg.filter_zero_variance and not self._signal():
            self.wasted += self.c.tokens_per_group
        else:
            self.buffer.append(version)

    def _drop_stale(self) -> None:
        bound = self.cfg.max_staleness + self.cfg.carry_staleness
        keep = [v for v in self.buffer if self.version - v <= bound]
        self.wasted += (len(self.buffer) - len(keep)) * self.c.tokens_per_group
        self.buffer = keep

    def try_train(self) -> None:
        b = self.cfg.groups_per_step
        self._drop_stale()
        if self.training or len(self.buffer) < b or self.steps >= self.cfg.steps:
            return
        self.buffer.sort()
        self.buffer = self.buffer[b:]
        self.taken += b
        self.training = True
        if self.first_step_end is not None:  # steady state: the wait for the first batch is warm-up
            self.idle_s += self.now - self.idle_since
        step = self.c.train_s / self.cfg.train_scale * self.train_factor + self.c.sync_s
        self._push(self.now + step, "trained")

    def on_trained(self) -> None:
        self.training, self.version, self.steps = False, self.version + 1, self.steps + 1
        self.idle_since = self.now
        if self.first_step_end is None:
            self.first_step_end = self.now

    def run(self) -> SimResult:
        sync = self.cfg.max_staleness == 0
        while self.steps < self.cfg.steps:
            if sync and not self.training and self.in_flight == 0 and len(self.buffer) < self.cfg.groups_per_step:
                need = self.cfg.groups_per_step - len(self.buffer) + self.cfg.overprovision
                for _ in range(need):
                    self._start()
            elif not sync:
                self._issue()
            if not self.events:
                break
            self.now, _, kind, data = heapq.heappop(self.events)
            if kind == "done":
                self.on_done(data)
            elif kind == "trained":
                self.on_trained()
            if not sync or self.in_flight == 0:
                self.try_train()
        return self._result()

    def _result(self) -> SimResult:
        b, steps = self.cfg.groups_per_step, self.steps
        t0 = self.first_step_end or 0.0
        rate = (steps - 1) * b / (self.now - t0) if steps > 1 and self.now > t0 else 0.0
        steady = self.now - t0
        return SimResult(self.now, steps * b, self.idle_s / steady if steady > 0 else 0.0, rate,
                         self.wasted / self.generated if self.generated else 0.0, steps,
                         min(1.0, self.gen_busy / self.now / self.cfg.engines) if self.now else 0.0)


def _run(costs: Costs, cfg: SimConfig, seed: int, gen_factor: float, train_factor: float) -> SimResult:
    sim = _Sim(costs, cfg, seed)
    sim.gen_factor, sim.train_factor = gen_factor, train_factor
    return sim.run()


def _one(costs: Costs, cfg: SimConfig, seed: int) -> SimResult:
    """One seeded run; with shared_cpu, the slow-downs found by fixed-point iteration:
    trainer x (1 + engine busy share), engine x (1 + trainer busy share)."""
    gen_f = train_f = 1.0
    result = _run(costs, cfg, seed, gen_f, train_f)
    for _ in range(6 if cfg.shared_cpu else 0):
        train_f = 1.0 + result.engine_busy_frac
        gen_f = 1.0 + (1.0 - result.trainer_idle_frac)
        result = _run(costs, cfg, seed, gen_f, train_f)
    return result


def simulate(costs: Costs, cfg: SimConfig, seed: int = 0, repeats: int = 3) -> SimResult:
    """The mean over `repeats` seeded runs of the model."""
    runs = [_one(costs, cfg, seed + i) for i in range(repeats)]
    mean = lambda k: sum(getattr(r, k) for r in runs) / len(runs)  # noqa: E731
    return SimResult(mean("wall_s"), runs[0].trained_groups, mean("trainer_idle_frac"),
                     mean("throughput"), mean("wasted_token_frac"), runs[0].steps, mean("engine_busy_frac"))


def lognormal_samples(median: float, sigma: float, n: int = 2000, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [median * math.exp(sigma * rng.gauss(0, 1)) for _ in range(n)]
