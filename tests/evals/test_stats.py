"""Evaluation statistics against brute force and hand-computed worked examples."""

import itertools
import math
import random

import pytest

from posttrain.evals import stats
from posttrain.evals.tdist import betainc, t_cdf, t_ppf


def brute_pass_at_k(n, c, k):
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)


def brute_pass_hat_k(n, c, k):
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(all(outcomes[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 8))
def test_pass_at_k_equals_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert stats.pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12)
            assert stats.pass_hat_k(n, c, k) == pytest.approx(brute_pass_hat_k(n, c, k), abs=1e-12)


def test_pass_at_k_worked_example_and_bias():
    # 5 samples, 2 correct: pass@1 = 2/5, pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert stats.pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert stats.pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # the plug-in 1-(1-c/n)^k = 0.64 is biased low
    assert 1 - (1 - 2 / 5) ** 2 < stats.pass_at_k(5, 2, 2)
    assert stats.pass_hat_k(5, 2, 2) == pytest.approx(0.1)


def test_pass_at_k_rejects_bad_counts():
    with pytest.raises(ValueError):
        stats.pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        stats.pass_at_k(3, 1, 4)


def test_pass_at_k_curve_over_tasks():
    scores = {"a": [1, 0, 0], "b": [0, 0, 0], "c": [1, 1, 1]}
    curve = stats.pass_at_k_curve(scores)
    assert list(curve) == [1, 2, 3]
    assert curve[1] == pytest.approx((1 / 3 + 0 + 1) / 3)
    assert curve[3] == pytest.approx(2 / 3)
    assert stats.mean_pass_hat_k(scores, 3) == pytest.approx(1 / 3)


def test_clustered_se_hand_computation_equal_k():
    scores = {"a": [1, 1, 0], "b": [0, 0, 0], "c": [1, 1, 1]}
    # task means 2/3, 0, 1; grand mean 5/9; sd^2 = (1+25+16)/81/2 = 21/81; SE^2 = 7/81
    assert stats.mean_reward(scores) == pytest.approx(5 / 9)
    assert stats.clustered_se(scores) == pytest.approx(math.sqrt(7) / 9)


def test_clustered_se_hand_computation_unequal_k():
    scores = {"a": [1, 0], "b": [1, 1, 1, 0]}
    # N=6, mean 2/3; cluster deviation sums -1/3, +1/3; SE^2 = (2/9)/36 * 2/1 = 1/81
    assert stats.clustered_se(scores) == pytest.approx(1 / 9)


def test_clustered_se_exceeds_naive_when_trials_agree():
    scores = {f"t{i}": [float(i % 2)] * 5 for i in range(40)}
    naive = math.sqrt(0.25 / 200)
    assert stats.clustered_se(scores) > 2 * naive


def test_clustered_mean_ci_fields_and_wald():
    rng = random.Random(0)
    scores = {f"t{i}": [float(rng.random() < 0.5) for _ in range(5)] for i in range(60)}
    ci = stats.clustered_mean_ci(scores)
    assert ci.method == "wald" and ci.n_tasks == 60 and ci.k == 5
    z = 1.959963984540054
    assert ci.ci_low == pytest.approx(ci.mean - z * ci.se)
    assert ci.ci_high == pytest.approx(ci.mean + z * ci.se)


def test_wilson_worked_example():
    # 8/10 at 95%: the textbook Wilson interval is (0.4902, 0.9433)
    lo, hi = stats.wilson_interval(0.8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)


def test_small_binary_uses_wilson_and_stays_in_unit_interval():
    all_pass = {"a": [1, 1], "b": [1, 1], "c": [1, 1]}
    ci = stats.clustered_mean_ci(all_pass)
    assert ci.method == "wilson" and ci.mean == 1.0 and ci.ci_high == 1.0
    assert ci.ci_low == pytest.approx(stats.wilson_interval(1.0, 3)[0])  # n_eff = 3 tasks
    ci = stats.clustered_mean_ci({"a": [0, 0, 1], "b": [0, 0, 0]})
    assert 0.0 <= ci.ci_low < ci.mean < ci.ci_high <= 1.0


def test_unequal_k_reports_mean_count():
    ci = stats.clustered_mean_ci({"a": [1, 0], "b": [1, 1, 1, 0]})
    assert ci.k == 3.0


def test_non_binary_uses_t_interval():
    scores = {"a": [0.5], "b": [0.25], "c": [0.75]}
    ci = stats.clustered_mean_ci(scores)
    assert ci.method == "t" and ci.mean == pytest.approx(0.5)
    assert ci.se == pytest.approx(0.25 / math.sqrt(3))
    assert ci.ci_high - ci.mean == pytest.approx(4.302652729911275 * ci.se, rel=1e-9)


def test_paired_compare_with_itself_is_zero():
    rng = random.Random(1)
    job = {f"t{i}": [float(rng.random() < 0.4) for _ in range(5)] for i in range(20)}
    d = stats.paired_compare(job, job)
    u = 1 - 0.025 ** (1 / 20)  # exact bound on the share of tasks that could differ unseen
    assert d.diff == 0 and d.p_value == 1.0 and d.method == "zero-spread bound"
    assert d.ci_low == pytest.approx(-u) and d.ci_high == pytest.approx(u)  # never a point
    assert d.correlation == pytest.approx(1.0)


def test_zero_spread_interval_for_a_uniform_shift():
    job = {f"t{i}": [0.0, 0.0] for i in range(10)}
    up = {t: [0.5, 0.5] for t in job}
    d = stats.paired_compare(up, job)
    u = 1 - 0.025 ** (1 / 10)
    assert d.diff == 0.5 and d.ci_low == pytest.approx(0.5 - 1.5 * u) and d.ci_high == pytest.approx(0.5 + 0.5 * u)
    assert d.p_value == pytest.approx(2 * 0.5**10)  # sign test: all ten tasks moved up


def test_paired_compare_worked_example():
    a = {"w": [1, 1], "x": [1, 0], "y": [0, 0], "z": [1, 1], "only_a": [1]}
    b = {"w": [0, 0], "x": [1, 0], "y": [0, 0], "z": [1, 0]}
    d = stats.paired_compare(a, b)
    # d = [1, 0, 0, .5]: mean .375, sd^2 = .6875/3, se = sd/2
    se = math.sqrt(0.6875 / 3) / 2
    assert d.n_tasks == 4 and d.only_a == 1 and d.only_b == 0
    assert d.diff == pytest.approx(0.375) and d.se == pytest.approx(se)
    q = t_ppf(0.975, 3)
    assert d.ci_low == pytest.approx(0.375 - q * se)
    assert d.p_value == pytest.approx(2 * (1 - t_cdf(0.375 / se, 3)))
    assert 0.2 < d.p_value < 0.25  # t = 1.567 on 3 df


def test_paired_compare_no_common_tasks():
    with pytest.raises(ValueError):
        stats.paired_compare({"a": [1]}, {"b": [1]})


def test_power_worked_example():
    # (1.95996 + 0.84162)^2 * 0.25 / 0.01 = 196.2 -> 197 tasks
    assert stats.tasks_needed(0.1, 0.5) == 197
    mdd = stats.min_detectable_difference(197, 0.5)
    assert mdd == pytest.approx(0.1, rel=0.01) and mdd <= 0.1


def test_t_distribution_known_quantiles():
    assert t_ppf(0.975, 1) == pytest.approx(12.706204736, rel=1e-8)
    assert t_ppf(0.975, 10) == pytest.approx(2.228138852, rel=1e-8)
    assert t_ppf(0.975, 30) == pytest.approx(2.042272456, rel=1e-8)
    assert t_cdf(1.0, 1) == pytest.approx(0.75)  # Cauchy
    assert t_cdf(2.0, 2) == pytest.approx(0.5 + 1 / math.sqrt(6))
    assert t_ppf(0.025, 10) == pytest.approx(-t_ppf(0.975, 10))


def test_t_cdf_matches_numeric_integration():
    df = 5.0
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    steps, t = 20000, 1.7
    h = t / steps
    f = [c * (1 + (i * h) ** 2 / df) ** (-(df + 1) / 2) for i in range(steps + 1)]
    simpson = h / 3 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2]))
    assert t_cdf(t, df) == pytest.approx(0.5 + simpson, abs=1e-10)
    assert betainc(2, 3, 0.4) == pytest.approx(0.5248, abs=1e-12)  # 1-(.6^4 + 4*.4*.6^3)


def test_t_interval_of_a_bounded_score_stays_in_its_bounds():
    scores = {"a": [0.1, 0.0], "b": [0.9, 1.0]}            # few tasks, wide spread: t_1 * SE > 0.5
    assert stats.clustered_mean_ci(scores).ci_low < 0            # unbounded: mean +- t * SE as is
    ci = stats.clustered_mean_ci(scores, bounds=(0.0, 1.0))
    assert ci.method == "t" and (ci.ci_low, ci.ci_high) == (0.0, 1.0) and ci.mean == 0.5


def test_paired_gain_is_after_minus_before():
    before, after = {"a": [0.0, 0.5], "b": [0.2], "c": [0.1]}, {"a": [1.0, 0.5], "b": [0.6], "c": [0.4]}
    g = stats.paired_gain(before, after)
    d = stats.paired_compare(after, before)
    assert g == {"paired_diff": d.diff, "paired_ci_low": d.ci_low, "paired_ci_high": d.ci_high,
                 "paired_p": d.p_value, "paired_n_tasks": 3}
    assert g["paired_diff"] == pytest.approx(0.4)
    assert stats.paired_gain(before, after, "paired_strict")["paired_strict_diff"] == g["paired_diff"]
