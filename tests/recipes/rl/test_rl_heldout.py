"""`posttrain rl`'s held-out scores of single-turn envs: the interval of a reward in [0, 1]."""

from types import SimpleNamespace

from posttrain.recipes.rl.heldout import single_turn_eval


class SpreadEnv:
    """Two held-out prompts, one nearly always wrong and one nearly always right."""

    task_ids = ["p0", "p1"]
    group_size, temperature = 2, 1.0

    def run(self, jobs, engine):
        rewards = {"p0": [0.1, 0.0], "p1": [0.9, 1.0]}
        for job in jobs:
            yield [SimpleNamespace(task_id=job.task_id, reward=r, reward_details={}) for r in rewards[job.task_id]]


def test_held_out_reward_interval_stays_in_the_unit_interval():
    e = single_turn_eval(SpreadEnv(), engine=None, seed=0)
    assert e["reward_mean"] == 0.5
    assert 0.0 <= e["ci_low"] <= e["reward_mean"] <= e["ci_high"] <= 1.0, e
