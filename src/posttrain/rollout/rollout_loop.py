"""The rollout loop of the pipeline: claim groups within the staleness bound's room, run
them through the environment in waves (again while a remote worker is lost), retry groups
lost to infrastructure, and put finished groups in the buffer (rollout/pipeline.py explains
the bound). `RolloutLoop` holds no state of its own: `Pipeline` sets it up."""

from __future__ import annotations

import os
import threading
import time

from posttrain.rollout.buffer import Group
from posttrain.rollout.executors.base import WaveLost
from posttrain.schedule.sampler import GroupJob

MAX_WAVE_ATTEMPTS = 8  # a wave lost this many times in a row stops the run


class RolloutLoop:
    """The rollout side of `Pipeline` (its workers' body and the sync run's collection)."""

    def _room(self, hedged: bool = True) -> int:
        c = self.cfg
        limit = (self.version + 1 + c.max_staleness) * c.groups_per_step
        ready = len(self.buffer) >= c.groups_per_step
        limit += self.hedge.hedges(time.perf_counter(), ready) if hedged else 0
        return limit - self.taken - len(self.in_flight) - len(self.buffer)

    def _claim(self, n: int) -> list[GroupJob]:
        """Up to n jobs: fewer while the scheduler's domains are at their quotas."""
        jobs, within_bound = [], max(0, self._room(hedged=False))
        while len(jobs) < n and (job := self.sampler.next()) is not None:
            jobs.append(job)
        self.over_issued += max(0, len(jobs) - within_bound)
        now = time.perf_counter()
        for j in jobs:
            self.in_flight[j.uid] = j
            self.hedge.issued(j.uid, j.domain, now)
            self.ledger.issue(j.uid, j.task_id)
            self.events.emit("issue", uid=j.uid, task=j.task_id, version=self.version)
        self.clock.start(time.perf_counter())
        return jobs

    def produce(self, jobs: list[GroupJob]) -> None:
        """Run one wave of groups and put them in the buffer (the rollout loop's body)."""
        try:
            results = self._run_wave(jobs)
        finally:
            with self.cond:
                self.clock.stop(time.perf_counter())
        with self.cond:
            now = time.perf_counter()
            for job, episodes in zip(jobs, results):
                self.in_flight.pop(job.uid, None)
                self.hedge.finished(job.uid, now)
                self.finished.update(e.status for e in episodes)
                if self._retry(job, episodes):
                    continue
                self._finish(job, episodes)
            self.cond.notify_all()

    def _retry(self, job: GroupJob, episodes) -> bool:
        """A group lost wholly to infrastructure errors is not scored: it runs again (same uid
        and seed), up to rollout.infra_retries times."""
        if not episodes or any(e.status != "infra_error" for e in episodes):
            return False
        if self.retries[job.uid] >= self.cfg.infra_retries:
            return False
        self.retries[job.uid] += 1
        self.ledger.requeue(job.uid, "infra_error")
        self.sampler.retry(job)
        self.events.emit("retry", uid=job.uid, task=job.task_id, attempt=self.retries[job.uid])
        return True

    def _finish(self, job: GroupJob, episodes) -> None:
        group = Group.of(job, episodes, self.version)
        reason = self.sampler.observe(job, [e.reward for e in episodes], [e.status for e in episodes],
                                      sum(e.tokens_out for e in episodes))
        if reason:
            self.events.emit("quarantine", task=job.task_id, domain=job.domain, reason=reason)
        kept = self.buffer.put(group, self.cfg.filter_zero_variance)
        self.ledger.buffer(job.uid) if kept else self.ledger.drop(job.uid, "filtered")
        self.tokens["generated"] += group_tokens(group)
        if not kept:
            self.tokens["filtered"] += group_tokens(group)
            self.returned_since_step += 1
            self.sampler.returned(job)
        self.events.emit("finish", uid=job.uid, kept=kept, version_min=group.version_min,
                         version_max=group.version_max,
                         rewards=[round(e.reward, 6) for e in episodes], domain=job.domain,
                         gen_s=round(sum(e.timings.get("generate_s", 0.0) for e in episodes), 5),
                         verify_s=[round(e.timings.get("verify_s", 0.0), 5) for e in episodes])

    def _run_wave(self, jobs: list[GroupJob]) -> list:  # env.run, again while its worker is lost
        for attempt in range(MAX_WAVE_ATTEMPTS):
            with self.cond:
                for j in jobs:
                    self.ledger.start(j.uid)
            try:
                return self.env.run(jobs, self.engine)
            except WaveLost as lost:
                with self.cond:
                    for j in jobs:
                        self.ledger.requeue(j.uid, "worker_lost")
                    self.events.emit("reissue", uids=[j.uid for j in jobs], reason=str(lost))
                if attempt + 1 == MAX_WAVE_ATTEMPTS:
                    raise

    def _pin_worker(self) -> None:
        """A worker that only waits on an engine process runs on that process's cores, off the
        trainer's."""
        if self.env.waits_on_engine and self.engine.cores:
            os.sched_setaffinity(threading.get_native_id(), self.engine.cores)

    def _poll_s(self) -> float:
        """How long an idle worker waits without an event. A token quota frees up and a group
        turns straggler with time, not events: a worker wakes when the next group would turn
        straggler, and not at all for that while the buffer holds a batch (no hedge is issued
        then). Waking every worker often holds the trainer's thread off the interpreter."""
        if self.cfg.hedge_after <= 0 or len(self.buffer) >= self.cfg.groups_per_step:
            return 0.5
        t = self.hedge.next_straggler_in(time.perf_counter())
        return 0.5 if t is None else min(0.5, max(0.005, t))

    def _rollout_worker(self) -> None:
        try:
            self._pin_worker()
            while True:
                with self.cond:
                    while not self.stop and (self._room() <= 0 or not self.sampler.has_room()):
                        self.cond.wait(timeout=self._poll_s())
                    if self.stop:
                        return
                    jobs = self._claim(min(self._room(), self.cfg.groups_per_wave))
                if jobs:
                    self.produce(jobs)
        except BaseException as e:  # surfaced by the training loop
            with self.cond:
                self.error, self.stop = e, True
                self.cond.notify_all()


def group_tokens(group: Group) -> int:
    return sum(e.tokens_out for e in group.episodes)
