"""Asynchronous RL as two loops around a buffer.

The rollout loop claims group assignments from the task sampler, runs them through the
environment (in waves of lockstep groups) and puts finished groups in the buffer. The
training loop takes the B lowest-uid groups whose oldest token is at most `max_staleness`
versions old, takes one optimizer step and publishes the weights as version + 1.

max_staleness 0 runs both loops in one thread, alternating: collect a batch at version v,
train, publish; a run is then a pure function of the seed. max_staleness >= 1 runs
`workers` rollout threads beside the trainer. A group is issued only while the groups
taken by the trainer plus those outstanding (in flight or buffered) stay within
(version + 1 + max_staleness) * B + overprovision: every group issued at version v can then
be trained by step v + max_staleness, so none is generated only to be dropped as stale
(AReaL's rule). With `hedge_after`, the over-provisioned groups are hedges for stragglers
only (rollout/hedge.py). Episodes in flight during a publish continue on the new weights (partial
rollouts, per-token versions). With `carry_staleness` c, the trainer takes groups up to
max_staleness + c versions old: a straggler the batch went without is carried into a later
batch (the lowest uids go first), not dropped, and so is a group it pushes back.

Every group's state is in the ledger (rollout/ledger.py). A wave whose worker was lost
(`WaveLost`, from a remote env that replaced it) runs again with the same groups and seed.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from posttrain.rollout.buffer import Buffer, Group
from posttrain.rollout.config import RolloutConfig
from posttrain.rollout.events import EventLog
from posttrain.rollout.hedge import StragglerHedge
from posttrain.rollout.ledger import GroupLedger
from posttrain.rollout.rollout_loop import RolloutLoop, group_tokens
from posttrain.rollout.stats import IdleClock, domain_stats, episode_stats, staleness_stats
from posttrain.rollout.weights import LockedEngine
from posttrain.schedule.sampler import GroupJob, TaskSampler
from posttrain.train.trainer import PolicyTrainer, RLConfig

SWITCH_INTERVAL_S = 0.0005  # Python's default 5 ms GIL hand-over stalls the training thread


class Pipeline(RolloutLoop):
    def __init__(self, env, engine: LockedEngine, trainer: PolicyTrainer, sampler: TaskSampler,
                 cfg: RolloutConfig, algo: RLConfig, events: EventLog | None = None,
                 record_dir: Path | None = None):
        self.env, self.engine, self.trainer, self.sampler = env, engine, trainer, sampler
        self.record_dir = record_dir  # if set, every trained batch is written there (for replay)
        self.cfg, self.algo, self.events = cfg, algo, events or EventLog(None)
        self.version = self.step = self.trajectories = 0
        self.taken = 0  # groups the trainer has taken, over the whole run
        self.buffer = Buffer()
        self.in_flight: dict[int, GroupJob] = {}
        self.cond = threading.Condition()
        self.stop, self.error = False, None
        self.returned_since_step = 0
        self.clock = IdleClock(time.perf_counter())
        self.trainer_wait_s = 0.0
        self.finished = Counter()  # statuses of every finished episode, trained or not
        self.retries = Counter()   # uid -> times its group was re-run after infra errors
        self.ledger = GroupLedger()
        self.hedge = StragglerHedge(cfg.hedge_after, cfg.overprovision)
        self.tokens = Counter()    # generated, and discarded as filtered or stale
        self.over_issued = 0       # groups issued beyond the staleness bound's room
        self.last_batch: list[Group] = []  # the groups of the latest step (on_step reads them)

    # ---- the training loop -------------------------------------------------------------

    def _short(self) -> bool:
        """Too many groups came back without signal since the last step: go with what we have."""
        c = self.cfg
        return self.returned_since_step >= c.max_refill_rounds * (c.groups_per_step + c.overprovision)

    def _stuck(self, plan: dict[str, int] | None) -> bool:
        """No room to issue, and nothing in flight of a domain the batch still lacks: the
        batch cannot fill as planned, so it is topped up from other domains (and the shares'
        carry owes the lacking domains for later)."""
        if plan is None or self._room() > 0:
            return False
        have = Counter(g.job.domain for g in self.buffer.groups)
        lacking = {d for d, n in plan.items() if have[d] < n}
        return not any(j.domain in lacking for j in self.in_flight.values())

    def _batch_sync(self) -> list[Group]:
        c = self.cfg
        for _ in range(c.max_refill_rounds):
            with self.cond:
                self._drop_stale()
                if self.buffer.can_take(c.groups_per_step, self.sampler.batch_plan(c.groups_per_step)):
                    break
                jobs = self._claim(c.groups_per_step - len(self.buffer) + c.overprovision)
            if jobs:
                self.produce(jobs)
        with self.cond:
            self._drop_stale()
            return self._take()

    def _batch_async(self) -> list[Group]:
        c = self.cfg
        t0 = time.perf_counter()
        with self.cond:
            while True:
                if self.error is not None:
                    raise self.error
                self._drop_stale()
                plan = self.sampler.batch_plan(c.groups_per_step)
                if self.buffer.can_take(c.groups_per_step, plan) or self._short() or self._stuck(plan):
                    break
                self.cond.wait(timeout=0.5)
            self.trainer_wait_s += time.perf_counter() - t0
            return self._take()

    def _take(self) -> list[Group]:
        """B groups, each domain's share of them as the scheduler plans (exact over time)."""
        n = self.cfg.groups_per_step
        groups = self.buffer.take(n, self.sampler.batch_plan(n))
        self.sampler.settle(n, [g.job for g in groups])
        self.taken += len(groups)
        return groups

    @property
    def train_bound(self) -> int:
        """The oldest a group may be when trained: the issue bound plus the carry allowance."""
        return self.cfg.max_staleness + self.cfg.carry_staleness

    def _drop_stale(self) -> None:
        dropped = self.buffer.drop_stale(self.version, self.train_bound)
        self.returned_since_step += len(dropped)
        for g in dropped:
            self.sampler.returned(g.job)
            self.tokens["stale"] += group_tokens(g)
        if dropped:
            for g in dropped:
                self.ledger.drop(g.uid, "stale")
            self.events.emit("drop", uids=[g.uid for g in dropped], version=self.version)
            self.cond.notify_all()

    def train_on(self, groups: list[Group]) -> dict:
        """One optimizer step on the groups, then publish version + 1 to the engine."""
        self.last_batch = groups
        episodes = [e for g in groups for e in g.trainable]
        stats = episode_stats([e for g in groups for e in g.episodes]) | domain_stats(groups)
        stats |= staleness_stats(episodes, self.version, self.train_bound)
        carried = [g for g in groups if self.version - g.version_min > self.cfg.max_staleness]
        stats["groups_carried"] = float(len(carried))
        with self.cond:
            self.tokens["carried"] += sum(group_tokens(g) for g in carried)
            self.events.emit("train", step=self.step, version=self.version,
                             uids=[g.uid for g in groups])
            self.sampler.mark_consumed([g.job.task_id for g in groups])
            for g in groups:
                self.ledger.train(g.uid, self.step)
            self.returned_since_step = 0
        if self.record_dir is not None:
            self.record_dir.mkdir(parents=True, exist_ok=True)
            (self.record_dir / f"step-{self.step:06d}.json").write_text(
                json.dumps({"version": self.version, "groups": [g.to_dict() for g in groups]}))
        if not episodes:  # no version is spent on these groups: they free their room
            with self.cond:
                self.taken -= len(groups)
                self.cond.notify_all()
            return stats | {"skipped": 1.0, "groups": 0.0}
        stats |= self.trainer.rl_step(episodes, self.algo)
        # The weights land first: a worker that the new version lets in samples from them.
        t_publish = time.perf_counter()
        self.engine.publish(self.trainer.model, self.version + 1)
        stats["publish_s"] = time.perf_counter() - t_publish
        with self.cond:
            self.version += 1
            self.events.emit("publish", version=self.version)
            self.cond.notify_all()  # a new version makes room: wake a worker waiting for it
        self.trajectories += len(episodes)
        return stats | {"skipped": 0.0, "groups": float(len(groups))}

    def run(self, on_step: Callable[[int, dict], None] | None = None) -> None:
        """Train until cfg.steps; on_step(step, stats) runs after each step (log, checkpoint)."""
        asynchronous = self.cfg.max_staleness > 0
        workers = [threading.Thread(target=self._rollout_worker, daemon=True, name=f"rollout-{i}")
                   for i in range(self.cfg.workers if asynchronous else 0)]
        for w in workers:
            w.start()
        t_start = time.perf_counter()
        switch = sys.getswitchinterval()
        if workers:  # a worker that wakes from I/O must not hold the trainer off the GIL for 5 ms
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        try:
            while self.step < self.cfg.steps:
                stats = self._one_step(asynchronous, t_start)
                if on_step is not None:
                    on_step(self.step, stats)
                self.step += 1
        finally:
            with self.cond:
                self.stop = True
                self.cond.notify_all()
            for w in workers:
                w.join()
            sys.setswitchinterval(switch)

    def _one_step(self, asynchronous: bool, t_start: float) -> dict:
        t0, busy0, wait0 = time.perf_counter(), self.clock.busy(time.perf_counter()), self.trainer_wait_s
        gen0 = self.engine.generate_s
        groups = self._batch_async() if asynchronous else self._batch_sync()
        if not asynchronous:  # the trainer waited for the whole collection
            self.trainer_wait_s += time.perf_counter() - t0
        stats = self.train_on(groups)
        now = time.perf_counter()
        wall = max(now - t0, 1e-9)
        with self.cond:
            busy = self.clock.busy(now) - busy0
            stats |= {"version": float(self.version), "buffer_groups": float(len(self.buffer)),
                      "groups_filtered_total": float(self.buffer.stats.filtered),
                      "groups_dropped_stale_total": float(self.buffer.stats.dropped_stale)}
            stats |= {f"finished_{k}_total": float(v) for k, v in sorted(self.finished.items())}
            stats |= {f"tokens_{k}_total": float(v) for k, v in sorted(self.tokens.items())}
            stats |= self.sampler.metrics()
        return stats | {
            "trainer_idle_frac": min(1.0, (self.trainer_wait_s - wait0) / wall),
            "sampler_idle_frac": max(0.0, 1.0 - busy / wall),
            "engine_busy_frac": min(1.0, (self.engine.generate_s - gen0) / wall),
            "step_wall_s": wall, "elapsed_s": now - t_start,
            "trajectories_total": float(self.trajectories),
            "trajectories_per_s": self.trajectories / max(now - t_start, 1e-9)}

    def audit(self) -> dict:
        """The ledger's audit: groups lost (held by no one, never final) and per-state counts."""
        with self.cond:
            held = {*self.in_flight, *(g.uid for g in self.buffer.groups),
                    *(j.uid for j in self.sampler.requeued)}
            return self.ledger.audit(held)

    # ---- checkpoint state --------------------------------------------------------------

    def state_dict(self) -> dict:
        """Everything but the model and optimizer; in-flight groups are re-queued."""
        with self.cond:
            sampler = self.sampler.state_dict()
            requeue = {j["uid"]: j for j in sampler["requeued"]}
            requeue |= {j.uid: asdict(j) for j in self.in_flight.values()}
            sampler["requeued"] = [requeue[u] for u in sorted(requeue)]
            return {"version": self.version, "step": self.step + 1, "trajectories": self.trajectories,
                    "taken": self.taken,
                    "buffer": self.buffer.state_dict(), "sampler": sampler,
                    "events": self.events.count, "finished": dict(self.finished),
                    "tokens": dict(self.tokens),
                    "ledger": self.ledger.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.version, self.step = state["version"], state["step"]
        self.trajectories = state["trajectories"]
        self.taken = state.get("taken", self.version * self.cfg.groups_per_step)  # older checkpoints
        self.buffer.load_state_dict(state["buffer"])
        self.sampler.load_state_dict(state["sampler"])
        self.events.count = state["events"]
        self.finished = Counter(state["finished"])
        self.tokens = Counter(state.get("tokens", {}))
        self.ledger.load_state_dict(state.get("ledger", {}))
        self.engine.publish(self.trainer.model, self.version)
