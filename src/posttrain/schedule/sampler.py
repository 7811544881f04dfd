"""Task sampler for RL: group assignments drawn from seeded epoch permutations.

Each group gets a uid (0, 1, 2, ...) and a task; the task of uid u is fixed by the seed
and u alone, so a run that re-queues in-flight groups after a crash gets the same
assignments. Its whole state is a small dict (checkpointed with the pipeline).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class GroupJob:
    """One group of G attempts at one task; `seed` drives the sampling of all G."""

    uid: int
    task_index: int
    task_id: str
    seed: int
    domain: str = "default"


class TaskSampler:
    """Hands out GroupJobs in uid order; `requeue` puts jobs back to be handed out first."""

    def __init__(self, task_ids: list[str], seed: int):
        if not task_ids:
            raise ValueError("the task set is empty: no valid tasks to sample from")
        self.task_ids, self.seed = list(task_ids), seed
        self.next_uid = 0
        self.requeued: list[GroupJob] = []
        self.consumed: list[str] = []  # task ids of groups that were trained on, in order

    def _permutation(self, epoch: int) -> list[int]:
        order = list(range(len(self.task_ids)))
        random.Random(f"{self.seed}/epoch/{epoch}").shuffle(order)
        return order

    def job(self, uid: int) -> GroupJob:
        n = len(self.task_ids)
        index = self._permutation(uid // n)[uid % n]
        return GroupJob(uid, index, self.task_ids[index], (self.seed * 1_000_003 + uid) % 2**31)

    def next(self) -> GroupJob:
        if self.requeued:
            return self.requeued.pop(0)
        job = self.job(self.next_uid)
        self.next_uid += 1
        return job

    def requeue(self, jobs: list[GroupJob]) -> None:
        self.requeued = sorted(set(self.requeued) | set(jobs), key=lambda j: j.uid)

    def retry(self, job: GroupJob) -> None:
        self.requeue([job])

    # One task list has no shares, quotas or curriculum: the scheduler's other verbs are no-ops.
    def has_room(self) -> bool:
        return True

    def observe(self, job: GroupJob, rewards, statuses, tokens: int = 0) -> None:
        return None

    def returned(self, job: GroupJob) -> None:
        pass

    def batch_plan(self, n: int) -> None:
        return None

    def settle(self, n: int, taken: list[GroupJob]) -> None:
        pass

    def metrics(self) -> dict[str, float]:
        return {}

    def mark_consumed(self, task_ids: list[str]) -> None:
        self.consumed.extend(task_ids)

    def state_dict(self) -> dict:
        return {"next_uid": self.next_uid, "requeued": [asdict(j) for j in self.requeued],
                "consumed": list(self.consumed), "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        self.next_uid, self.seed = state["next_uid"], state["seed"]
        self.requeued = [GroupJob(**j) for j in state["requeued"]]
        self.consumed = list(state["consumed"])
