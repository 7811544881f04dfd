"""One pool shared by training rollouts and an evaluation: rollouts preempt evaluation
trials (real subprocesses, killed), the evaluation resumes and records every trial once."""

import subprocess
import sys
import threading
import time

import pytest

from posttrain.schedule.pool import PriorityPool


def run_trial(pool, kind, seconds, lease=None):
    """A trial is a real process; a preempted one is killed and reports None."""
    lease = lease or pool.acquire(kind)
    proc = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds}); print('done')"],
                            stdout=subprocess.PIPE, text=True)
    while proc.poll() is None:
        if lease.preempted.wait(0.01):
            proc.kill()
            proc.wait()
            pool.release(lease)
            return None
    out = proc.stdout.read().strip()
    pool.release(lease)
    return out


def test_rollouts_preempt_an_evaluation_that_still_scores_every_trial_once():
    pool = PriorityPool(slots=2, priorities={"train": 10, "eval": 0}, quotas={"eval": 2})
    results: dict[int, list] = {i: [] for i in range(6)}
    attempts = []

    queue, lock = list(range(6)), threading.Lock()

    def evaluation():  # two of these run the evaluation's trials, filling the pool
        while True:
            with lock:
                if not queue:
                    return
                trial = queue.pop(0)
                attempts.append(trial)
            out = run_trial(pool, "eval", 0.3)
            with lock:
                if out is None:
                    queue.append(trial)          # preempted: resumes later
                else:
                    results[trial].append(out)   # recorded only when finished

    def training():
        time.sleep(0.1)
        for _ in range(3):
            assert run_trial(pool, "train", 0.2) == "done"

    threads = [threading.Thread(target=evaluation) for _ in range(2)] + [threading.Thread(target=training)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(v == ["done"] for v in results.values())
    assert pool.stats["preempted_eval"] >= 1 and len(attempts) > 6
    assert pool.in_use() == 0


def test_quotas_hold_and_bad_pools_are_refused():
    pool = PriorityPool(slots=3, priorities={"train": 1, "eval": 0}, quotas={"train": 1})
    a = pool.acquire("train")
    assert not pool.can_acquire("train") and pool.acquire("train", timeout=0.05) is None
    assert pool.can_acquire("eval")
    pool.release(a)
    assert pool.can_acquire("train")
    with pytest.raises(ValueError, match="never be met"):
        PriorityPool(slots=2, priorities={"eval": 0}, quotas={"eval": 0})
    with pytest.raises(ValueError):
        PriorityPool(slots=0, priorities={})
