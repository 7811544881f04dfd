"""Synthetic workloads for bench/schedule.py: share accuracy under out-of-order finishes
and filtering, a multi-domain suite with known per-task pass rates that a simulated
policy learns (for curriculum against uniform), and a 100k-task scheduler for pick speed."""

from __future__ import annotations

import json
import math
import random
import time

from posttrain.schedule.curriculum import CurriculumKnobs
from posttrain.schedule.scheduler import DomainTasks, Scheduler


def share_run(shares: dict[str, float], batch: int, steps: int, seed: int, ours: bool) -> list[dict]:
    """Groups per domain in each trained batch. Groups finish out of order (each in-flight
    group finishes a round with probability 0.6) and a domain-dependent share is filtered
    (zero variance). ours: the scheduler's issue order and batch plan; else prime-rl's way,
    a weighted random domain per group and the first B finished groups per batch."""
    rng = random.Random(seed)
    names = list(shares)
    filtered = {d: 0.4 * i / max(1, len(names) - 1) for i, d in enumerate(names)}
    sched = Scheduler([DomainTasks(d, [f"{d}-{i}" for i in range(50)], share=s) for d, s in shares.items()], seed)
    weights = [shares[d] for d in names]
    in_flight, buffer, batches = [], [], []
    for _ in range(steps):
        for _round in range(8):
            plan = sched.batch_plan(batch) if ours else None
            have = {d: sum(j.domain == d for j in buffer) for d in names}
            if (all(have[d] >= n for d, n in plan.items()) if ours else len(buffer) >= batch):
                break
            while len(in_flight) + len(buffer) < 2 * batch:
                job = sched.next()
                if not ours:  # the domain drawn at random, the task still from that domain
                    job = job.__class__(job.uid, 0, "", 0, rng.choices(names, weights)[0])
                in_flight.append(job)
            done = [j for j in in_flight if rng.random() < 0.6]
            in_flight = [j for j in in_flight if j not in done]
            for j in done:
                if ours:
                    sched.observe(j, [], [])
                if rng.random() < filtered[j.domain]:
                    if ours:
                        sched.returned(j)
                else:
                    buffer.append(j)
        if ours:
            plan, left, taken = sched.batch_plan(batch), {}, []
            left = dict(plan)
            for j in sorted(buffer, key=lambda j: j.uid):
                if left.get(j.domain, 0) > 0:
                    left[j.domain] -= 1
                    taken.append(j)
            rest = [j for j in sorted(buffer, key=lambda j: j.uid) if j not in taken]
            taken += rest[:batch - len(taken)]
            sched.settle(batch, taken)
        else:
            taken = sorted(buffer, key=lambda j: j.uid)[:batch]
        buffer = [j for j in buffer if j not in taken]
        batches.append({d: sum(j.domain == d for j in taken) for d in names})
    return batches


def window_dev_pp(batches: list[dict], shares: dict[str, float], window: int = 50) -> float:
    """Largest |realised - target| share, in points, over every sliding window of steps."""
    worst = 0.0
    for start in range(0, len(batches) - window + 1):
        w = batches[start:start + window]
        total = sum(sum(b.values()) for b in w)
        for d, s in shares.items():
            worst = max(worst, abs(sum(b[d] for b in w) / total - s) * 100)
    return worst


class LearningSuite:
    """Tasks with known pass rates sigmoid(domain skill + task offset); a trained group
    whose rewards differ raises its task's offset by `lr` and its domain's skill by
    `transfer` (a GRPO step on a group of equal rewards changes nothing)."""

    def __init__(self, domains: int, per_domain: int, seed: int, lr: float = 0.5, transfer: float = 0.005):
        rng = random.Random(seed)
        self.skill = [0.0] * domains
        self.offset = [[rng.choice([rng.uniform(-6, -3), rng.uniform(-1.5, 1.5), rng.uniform(3, 6)])
                        for _ in range(per_domain)] for _ in range(domains)]
        self.lr, self.transfer, self.rng = lr, transfer, rng

    def p(self, d: int, t: int) -> float:
        return 1 / (1 + math.exp(-(self.skill[d] + self.offset[d][t])))

    def mean_reward(self) -> float:
        ps = [self.p(d, t) for d in range(len(self.skill)) for t in range(len(self.offset[d]))]
        return sum(ps) / len(ps)

    def group(self, d: int, t: int, g: int) -> list[float]:
        return [float(self.rng.random() < self.p(d, t)) for _ in range(g)]

    def learn(self, d: int, t: int, rewards: list[float]) -> None:
        if len(set(rewards)) > 1:
            self.offset[d][t] += self.lr
            self.skill[d] += self.transfer


def curriculum_run(curriculum: bool, steps: int, seed: int, batch: int = 16, g: int = 8,
                   domains: int = 4, per_domain: int = 100) -> list[float]:
    """Mean true reward of the suite after each step; the manifest priors are a k=4
    calibration of the initial policy (as `posttrain validate` writes)."""
    suite = LearningSuite(domains, per_domain, seed)
    rng = random.Random(seed + 1)
    priors = [{t: (sum(rng.random() < suite.p(d, t) for _ in range(4)), 4) for t in range(per_domain)}
              for d in range(domains)]
    tasks = [DomainTasks(f"d{d}", [f"d{d}-{t}" for t in range(per_domain)], share=1 / domains,
                         priors=priors[d] if curriculum else {}) for d in range(domains)]
    knobs = CurriculumKnobs(group_size=g) if curriculum else None
    sched = Scheduler(tasks, seed, knobs)
    curve = []
    for _ in range(steps):
        for _ in range(batch):
            job = sched.next()
            d, t = int(job.domain[1:]), job.task_index - sched.offset[job.domain]
            rewards = suite.group(d, t, g)
            sched.observe(job, rewards, ["ok"] * g)
            suite.learn(d, t, rewards)
        curve.append(suite.mean_reward())
    return curve


def big_scheduler(n_tasks: int, n_domains: int, seed: int) -> Scheduler:
    rng = random.Random(seed)
    per = n_tasks // n_domains
    return Scheduler([DomainTasks(f"d{k}", [f"d{k}-{i}" for i in range(per)], share=rng.random() + 0.1,
                                  priors={i: (rng.randint(0, 4), 4) for i in range(per)})
                      for k in range(n_domains)], seed, CurriculumKnobs(group_size=8))


def pick_speed(n_tasks: int, n_domains: int, picks: int, seed: int = 0) -> dict:
    """Per-pick latency (next(), and observe() of the group's result) at scale, the state
    size with every task touched, and a restored scheduler's picks against the original's."""
    t0 = time.perf_counter()
    sched = big_scheduler(n_tasks, n_domains, seed)
    build_s = time.perf_counter() - t0
    rng = random.Random(seed)
    pick_ms, observe_ms, settle_ms, batch = [], [], [], []
    for k in range(picks):
        t = time.perf_counter()
        job = sched.next()
        t1 = time.perf_counter()
        sched.observe(job, [float(rng.random() < 0.5) for _ in range(8)], ["ok"] * 8)
        t2 = time.perf_counter()
        pick_ms.append((t1 - t) * 1e3)
        observe_ms.append((t2 - t1) * 1e3)
        batch.append(job)
        if len(batch) == 64:  # a trained batch of B = 64 (every carry changes: O(D) rebuild)
            t = time.perf_counter()
            sched.batch_plan(64)
            sched.settle(64, batch)
            settle_ms.append((time.perf_counter() - t) * 1e3)
            batch = []
    for name, p in sched.pickers.items():  # touch every task: the largest state there can be
        for i in range(len(p.succ)):
            p.observe(i, [1.0, 0.0], ["ok", "ok"])
    state = json.dumps(sched.state_dict(), separators=(",", ":"))
    restored = big_scheduler(n_tasks, n_domains, seed)
    t = time.perf_counter()
    restored.load_state_dict(json.loads(state))
    load_s = time.perf_counter() - t
    same = all(a == b for a, b in ((sched.next(), restored.next()) for _ in range(2000)))
    pick_ms.sort()
    observe_ms.sort()
    settle_ms.sort()
    q = lambda xs, f: xs[min(len(xs) - 1, int(f * len(xs)))]  # noqa: E731
    return {"pick_p50_ms": q(pick_ms, 0.5), "pick_p99_ms": q(pick_ms, 0.99),
            "pick_max_ms": pick_ms[-1], "observe_p99_ms": q(observe_ms, 0.99),
            "settle_p99_ms": q(settle_ms, 0.99), "state_mb": len(state) / 1e6,
            "build_s": build_s, "load_s": load_s, "restored_picks_identical": same}


def rescan_pick_ms(n_tasks: int, picks: int, seed: int = 0) -> float:
    """prime-rl's way: each pick rescans every task's weight (O(n)); p99 in ms."""
    rng = random.Random(seed)
    rates = [rng.random() for _ in range(n_tasks)]
    times = []
    for _ in range(picks):
        t = time.perf_counter()
        weights = [0.2 if p <= 0.25 else 1.0 if p <= 0.75 else 0.2 for p in rates]
        i = rng.choices(range(n_tasks), weights)[0]
        times.append((time.perf_counter() - t) * 1e3)
        rates[i] = rng.random()
    times.sort()
    return times[int(0.99 * (len(times) - 1))]
