"""The multi-domain scheduler: shares of issued groups, quotas, the curriculum's effect,
exclusions and quarantine, and 20 kill-and-resume cycles with nothing lost or repeated."""

import copy
import json
import random

import pytest

from posttrain.schedule.curriculum import CurriculumKnobs, group_signal
from posttrain.schedule.sampler import GroupJob
from posttrain.schedule.scheduler import DomainTasks, Scheduler


def domains(n_per=20, shares=(0.5, 0.3, 0.2)):
    return [DomainTasks(f"d{k}", [f"d{k}-t{i}" for i in range(n_per)], share=s)
            for k, s in enumerate(shares)]


def test_issued_groups_follow_shares_and_tasks_run_without_replacement():
    sched = Scheduler(domains(), seed=1)
    jobs = [sched.next() for _ in range(100)]
    counts = {d: sum(j.domain == d for j in jobs) for d in ("d0", "d1", "d2")}
    assert counts == {"d0": 50, "d1": 30, "d2": 20}
    d0 = [j.task_id for j in jobs if j.domain == "d0"]
    assert sorted(d0[:20]) == sorted(set(d0[:20])) and len(set(d0[:20])) == 20  # one epoch
    assert all(sched.task_ids[j.task_index] == j.task_id for j in jobs)
    assert [j.uid for j in jobs] == list(range(100))


def test_a_domain_at_its_quota_waits_and_the_others_go_on():
    ds = domains()
    ds[0].max_groups, ds[1].max_groups, ds[2].max_groups = 1, 2, 3
    sched = Scheduler(ds, seed=0)
    jobs = [sched.next() for _ in range(6)]
    assert [sum(j.domain == d for j in jobs) for d in ("d0", "d1", "d2")] == [1, 2, 3]
    assert sched.next() is None and not sched.has_room()
    sched.observe(jobs[0], [1.0, 0.0], ["ok", "ok"])
    assert sched.next().domain == "d0"


def test_curriculum_prefers_learnable_tasks_and_follows_results():
    d = DomainTasks("d", [f"t{i}" for i in range(3)], priors={0: (8, 8), 1: (4, 8), 2: (0, 8)})
    sched = Scheduler([d], seed=0, knobs=CurriculumKnobs(group_size=4, prior_strength=8))
    picks = [sched.next() for _ in range(300)]
    share = {i: sum(j.task_index == i for j in picks) / 300 for i in range(3)}
    assert share[1] > 0.8 and share[0] < 0.1 and share[2] < 0.1
    for j in picks:
        sched.observe(j, [0.0] * 4, ["ok"] * 4)
    for _ in range(5):  # task 0 turns out hard (all fail), task 2 starts to pass half the time
        sched.observe(sched.next(), [0.0] * 4, ["ok"] * 4)
    cur = sched.pickers["d"]
    assert cur.band(1) == "too hard" and group_signal(cur.pass_rate(1), 4) < 0.1


def test_manifest_exclusions_and_quarantine_are_reported():
    d = DomainTasks("d", ["a", "b", "c"], usable=[0, 2])
    sched = Scheduler([d], seed=0, knobs=CurriculumKnobs(quarantine_after=2))
    assert {sched.next().task_id for _ in range(50)} == {"a", "c"}
    job = next(j for j in iter(sched.next, None) if j.task_id == "c")
    assert sched.observe(job, [0.0] * 4, ["infra_error"] * 4) is None
    assert "infra_error" in sched.observe(job, [0.0] * 4, ["verifier_error", "infra_error"] * 2)
    assert sched.quarantined == {"c": sched.quarantined["c"]}
    assert {sched.next().task_id for _ in range(30)} == {"a"}
    assert sched.metrics()["quarantined_total"] == 1.0


def test_bad_domains_are_refused():
    with pytest.raises(ValueError, match="no usable task"):
        Scheduler([DomainTasks("d", ["a"], usable=[])], seed=0)
    with pytest.raises(ValueError, match="repeat"):
        Scheduler([DomainTasks("d", ["a"]), DomainTasks("d", ["b"])], seed=0)


# ---- kill and resume ------------------------------------------------------------------

def reward(job):
    r = random.Random(f"{job.task_id}/{job.uid}")
    return [float(r.random() < 0.5) for _ in range(4)]


class Driver:
    """A synchronous trainer over the scheduler: issue B + 2 groups, finish them in uid
    order, take a batch by the plan, checkpoint every 3 steps (state as JSON)."""

    def __init__(self, state=None):
        self.sched = Scheduler(domains(shares=(0.6, 0.25, 0.15)), seed=7, knobs=CurriculumKnobs())
        self.buffer, self.in_flight, self.step, self.trained, self.returned = [], [], 0, [], []
        if state is not None:
            state = json.loads(state)
            self.sched.load_state_dict(state["sched"])
            self.step, self.trained, self.returned = state["step"], state["trained"], state["returned"]
            self.buffer = [GroupJob(**j) for j in state["buffer"]]

    def checkpoint(self) -> str:
        s = self.sched.state_dict()
        s["requeued"] = sorted(s["requeued"] + [copy.copy(j.__dict__) for j in self.in_flight],
                               key=lambda j: j["uid"])
        return json.dumps({"sched": s, "step": self.step, "trained": self.trained,
                           "returned": self.returned, "buffer": [j.__dict__ for j in self.buffer]})

    def run_step(self, kill_at: int | None) -> None:
        ops = 0
        while len(self.buffer) + len(self.in_flight) < 6:
            self.in_flight.append(self.sched.next())
            ops += 1
            if ops == kill_at:
                raise KeyboardInterrupt
        for job in sorted(self.in_flight, key=lambda j: j.uid):
            rewards = reward(job)
            self.sched.observe(job, rewards, ["ok"] * 4)
            self.in_flight.remove(job)
            if len(set(rewards)) > 1:
                self.buffer.append(job)
            else:
                self.sched.returned(job)
                self.returned.append(job.uid)
            ops += 1
            if ops == kill_at:
                raise KeyboardInterrupt
        plan = self.sched.batch_plan(4)
        taken = []
        for d, n in plan.items():
            taken += sorted((j for j in self.buffer if j.domain == d), key=lambda j: j.uid)[:n]
        self.buffer = [j for j in self.buffer if j not in taken]
        self.sched.settle(4, taken)
        self.trained += [j.uid for j in sorted(taken, key=lambda j: j.uid)]
        self.step += 1


def run(steps, kills):
    driver, saved = Driver(), None
    saved = driver.checkpoint()
    kills = dict(kills)
    while driver.step < steps:
        try:
            driver.run_step(kills.pop(driver.step, None))
        except KeyboardInterrupt:  # the process dies: everything since `saved` is gone
            driver = Driver(saved)
            continue
        if driver.step % 3 == 0:
            saved = driver.checkpoint()
    return driver


def test_twenty_kill_and_resume_cycles_lose_and_repeat_nothing():
    rng = random.Random(0)
    steps = 80
    reference = run(steps, {})
    kills = {s: rng.randint(1, 8) for s in rng.sample(range(steps), 20)}
    resumed = run(steps, kills)
    assert resumed.trained == reference.trained
    assert len(resumed.trained) == len(set(resumed.trained))
    accounted = sorted(resumed.trained + resumed.returned + [j.uid for j in resumed.buffer + resumed.in_flight])
    assert accounted == list(range(resumed.sched.next_uid))   # every issued uid, exactly once
    assert resumed.sched.state_dict() == reference.sched.state_dict()
