"""The pipeline simulator on workloads whose answers are known."""

from posttrain.schedule.simulate import Costs, SimConfig, lognormal_samples, simulate


def test_a_trainer_bound_workload_runs_at_the_trainers_pace():
    costs = Costs(gen_s=[0.001], verify_s={"default": [0.001]}, train_s=0.5)
    r = simulate(costs, SimConfig(steps=20, groups_per_step=4, max_staleness=1, workers=8))
    assert abs(r.throughput - 4 / 0.5) / 8 < 0.02 and r.trainer_idle_frac < 0.01


def test_sync_waits_for_the_slowest_group_of_each_batch():
    costs = Costs(gen_s=[0.0], verify_s={"default": [1.0, 0.1]}, train_s=0.1)
    r = simulate(costs, SimConfig(steps=30, groups_per_step=8, group_size=4, max_staleness=0))
    # a group of 4 draws hits the 1 s verifier with probability 15/16: nearly every step waits ~1 s
    assert 0.85 < r.trainer_idle_frac < 0.95 and r.wasted_token_frac == 0.0


def test_overprovisioning_lifts_a_long_tailed_workload_and_stale_groups_are_counted():
    costs = Costs(gen_s=[0.01], verify_s={"default": lognormal_samples(0.2, 1.0)}, train_s=0.2)
    none = simulate(costs, SimConfig(steps=60, groups_per_step=8, max_staleness=1, workers=16))
    over = simulate(costs, SimConfig(steps=60, groups_per_step=8, max_staleness=1, overprovision=8, workers=24))
    assert over.throughput > none.throughput and over.wasted_token_frac > 0


def test_shared_cpu_slows_both_sides_down():
    costs = Costs(gen_s=[0.05], verify_s={"default": [0.0]}, train_s=0.2)
    cfg = dict(steps=20, groups_per_step=4, max_staleness=1, workers=8)
    alone = simulate(costs, SimConfig(**cfg))
    shared = simulate(costs, SimConfig(shared_cpu=True, **cfg))
    assert shared.throughput < alone.throughput


def test_partial_rollouts_keep_the_stragglers_a_hedged_run_drops():
    """Hedges at s = 1 drop their stragglers as stale; with carry_staleness 1 they are
    trained a version later, so less is wasted and the trainer waits less."""
    costs = Costs(gen_s=[0.03], verify_s={"default": lognormal_samples(0.06, 1.0)}, train_s=0.5)
    cfg = dict(steps=40, groups_per_step=8, group_size=8, max_staleness=1, overprovision=8, workers=24,
               hedge_after=0.75)
    hedged = simulate(costs, SimConfig(**cfg))
    carried = simulate(costs, SimConfig(carry_staleness=1, **cfg))
    assert carried.wasted_token_frac < hedged.wasted_token_frac / 2
    assert carried.throughput > hedged.throughput and carried.trainer_idle_frac < hedged.trainer_idle_frac
