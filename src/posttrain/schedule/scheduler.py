"""The multi-domain scheduler: which domain and task each group gets, and what a batch holds.

Domains are chosen by stride scheduling over their shares, among those under their quotas
(schedule/domain_queue.py, O(log D) a pick); a domain's task by its curriculum (schedule/curriculum.py)
or, without one, by seeded permutations without replacement (as schedule/sampler.py).
Each group's uniform draw is a hash of (seed, uid), so a scheduler restored from its
state_dict hands out exactly the jobs the original would have: nothing skipped or repeated.
It speaks TaskSampler's verbs (next, requeue, mark_consumed, state_dict) plus observe,
returned and batch_plan.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import asdict, dataclass, field

from posttrain.schedule.curriculum import Curriculum, CurriculumKnobs, NO_VERDICT
from posttrain.schedule.domain_queue import DomainQueue
from posttrain.schedule.sampler import GroupJob
from posttrain.schedule.shares import ShareCarry


@dataclass
class DomainTasks:
    """One domain as the scheduler sees it: task ids, which are usable, manifest priors."""

    name: str
    task_ids: list[str]
    share: float = 1.0
    priority: int = 0
    usable: list[int] | None = None                  # local indices; None = all
    priors: dict[int, tuple[float, float]] = field(default_factory=dict)  # (successes, episodes)
    max_groups: int | None = None                    # groups in flight at once (sandbox slots / G)
    tokens_per_s: float | None = None


def unit_draw(seed: int, uid: int) -> float:
    return random.Random(f"{seed}/pick/{uid}").random()


class _Permutation:
    """Uniform draws without replacement: seeded epoch permutations of the usable tasks."""

    def __init__(self, usable: list[int], seed: int, name: str):
        self.usable, self.seed, self.name = usable, seed, name
        self.count, self._epoch, self._order = 0, -1, []

    def pick(self, u: float) -> int | None:
        if not self.usable:
            return None
        epoch, k = divmod(self.count, len(self.usable))
        if epoch != self._epoch:
            self._order = list(self.usable)
            random.Random(f"{self.seed}/{self.name}/epoch/{epoch}").shuffle(self._order)
            self._epoch = epoch
        self.count += 1
        return self._order[k]


class Scheduler:
    def __init__(self, domains: list[DomainTasks], seed: int, knobs: CurriculumKnobs | None = None):
        names = [d.name for d in domains]
        if len(set(names)) != len(names):
            raise ValueError(f"domain names repeat: {names}")
        self.domains = {d.name: d for d in domains}
        self.seed, self.knobs = seed, knobs
        self.offset, start = {}, 0
        for d in domains:
            self.offset[d.name], start = start, start + len(d.task_ids)
        self.task_ids = [t for d in domains for t in d.task_ids]  # global task_index order
        self.pickers = {d.name: self._picker(d) for d in domains}
        shares = {d.name: d.share for d in domains}
        self.batch = ShareCarry(shares)
        self.queue = DomainQueue(self.batch, {d.name: d.priority for d in domains},
                                 {d.name: d.max_groups for d in domains},
                                 {d.name: d.tokens_per_s for d in domains})
        self.next_uid = 0
        self.requeued: list[GroupJob] = []
        self.consumed: list[str] = []
        self.quarantined: dict[str, str] = {}

    @property
    def outstanding(self) -> Counter:
        return self.queue.outstanding

    @property
    def in_flight(self) -> Counter:
        return self.queue.in_flight

    def _picker(self, d: DomainTasks):
        usable = list(range(len(d.task_ids))) if d.usable is None else sorted(d.usable)
        if not usable:
            raise ValueError(f"domain {d.name!r} has no usable task")
        if self.knobs is None:
            return _Permutation(usable, self.seed, d.name)
        return Curriculum(len(d.task_ids), usable, d.priors, self.knobs)

    # ---- issuing -----------------------------------------------------------------------

    def has_room(self) -> bool:
        return bool(self.requeued) or self.queue.pick() is not None

    def next(self) -> GroupJob | None:
        """The next group to run, or None while every domain is at its quota."""
        if self.requeued:
            job = self.requeued.pop(0)
        else:
            name = self.queue.pick()
            if name is None:
                return None
            uid = self.next_uid
            local = self.pickers[name].pick(unit_draw(self.seed, uid))
            if local is None:  # every task quarantined: the domain is out
                raise RuntimeError(f"domain {name!r} has no usable task left: {self.quarantined}")
            self.next_uid += 1
            index = self.offset[name] + local
            job = GroupJob(uid, index, self.task_ids[index], (self.seed * 1_000_003 + uid) % 2**31, name)
        self.queue.issued(job.domain)
        return job

    def requeue(self, jobs: list[GroupJob]) -> None:
        """Jobs handed out but not finished go back, to be handed out first (same uid, seed)."""
        for j in jobs:
            self.queue.requeued(j.domain)
        self.requeued = sorted(set(self.requeued) | set(jobs), key=lambda j: j.uid)

    def retry(self, job: GroupJob) -> None:
        """A group lost to infrastructure errors runs again (its result was not scored)."""
        self.requeue([job])

    # ---- results -----------------------------------------------------------------------

    def observe(self, job: GroupJob, rewards: list[float], statuses: list[str], tokens: int = 0) -> str | None:
        """A group finished: free its slot, count its tokens, update the curriculum. Returns
        the reason if its task was quarantined."""
        self.queue.finished(job.domain, tokens)
        picker = self.pickers[job.domain]
        if not isinstance(picker, Curriculum):
            return None
        reason = picker.observe(job.task_index - self.offset[job.domain], rewards, statuses)
        if reason:
            self.quarantined[job.task_id] = reason
        return reason

    def returned(self, job: GroupJob) -> None:
        """The group will not be trained on (filtered, stale): its domain needs another."""
        self.queue.returned(job.domain)

    def batch_plan(self, n: int) -> dict[str, int]:
        """Groups per domain the next batch of n should hold."""
        return self.batch.plan(n)

    def settle(self, n: int, taken: list[GroupJob]) -> None:
        """The batch was taken: carry what each domain was owed and did not get."""
        taken_by = Counter(j.domain for j in taken)
        self.batch.commit(n, taken_by)
        self.queue.settled(taken_by)

    def metrics(self) -> dict[str, float]:
        out = {"quarantined_total": float(len(self.quarantined))}
        for name, p in self.pickers.items():
            if isinstance(p, Curriculum):
                bands = Counter(p.band(i) for i in p.usable if i not in p.quarantined)
                for band in ("too easy", "learnable", "too hard"):
                    out[f"d/{name}/tasks_{band.replace(' ', '_')}"] = float(bands[band])
        return out

    def mark_consumed(self, task_ids: list[str]) -> None:
        self.consumed.extend(task_ids)

    @staticmethod
    def all_infra(statuses: list[str]) -> bool:
        return bool(statuses) and all(s in NO_VERDICT for s in statuses)

    # ---- checkpoint state --------------------------------------------------------------

    def state_dict(self) -> dict:
        pick = {n: (p.state_dict() if isinstance(p, Curriculum) else {"count": p.count})
                for n, p in self.pickers.items()}
        return {"seed": self.seed, "next_uid": self.next_uid, "consumed": list(self.consumed),
                "requeued": [asdict(j) for j in self.requeued], "outstanding": dict(self.outstanding),
                "requeued_uids": [j.uid for j in self.requeued],
                "batch": self.batch.state_dict(), "pickers": pick, "quarantined": dict(self.quarantined)}

    def load_state_dict(self, state: dict) -> None:
        self.seed, self.next_uid = state["seed"], state["next_uid"]
        self.consumed = list(state["consumed"])
        self.requeued = [GroupJob(**j) for j in state["requeued"]]
        # Jobs the caller re-queued (its in-flight ones) were outstanding; next() counts them again.
        own = set(state["requeued_uids"])
        outstanding = Counter(state["outstanding"])
        outstanding.subtract(Counter(j.domain for j in self.requeued if j.uid not in own))
        self.batch.load_state_dict(state["batch"])
        self.queue.load(outstanding)
        for name, s in state["pickers"].items():
            p = self.pickers[name]
            if isinstance(p, Curriculum):
                p.load_state_dict(s)
            else:
                p.count = s["count"]
        self.quarantined = dict(state["quarantined"])
