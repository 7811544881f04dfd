"""Evaluation statistics: unbiased pass@k, task-clustered error bars, paired comparisons, power.

Pure functions over per-task score lists (`{task_id: [score of trial 1, ...]}`).
Formulas follow Chen et al. 2021 (pass@k) and Miller 2024, "Adding Error Bars to
Evals" (arXiv:2411.00640): trials of one task are correlated, so the task is the
unit of sampling and every standard error here is clustered by task.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import NormalDist

from posttrain.evals.tdist import t_cdf, t_ppf

Scores = dict[str, list[float]]

# Below this many tasks, or with fewer than this many expected passes/fails, a
# normal (Wald) interval on a proportion under-covers; Wilson does not.
SMALL_N_TASKS = 30
SMALL_EXPECTED_COUNT = 5


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased P(at least one of k draws without replacement passes), n samples, c passed.

    1 - C(n-c, k) / C(n, k), computed as 1 - prod_{i=n-c+1}^{n} (1 - k/i) to avoid
    huge binomials (Chen et al. 2021, Fig. 3).
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:  # every k-subset contains a pass
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased P(all k draws pass) (tau-bench's pass^k): C(c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    return math.comb(c, k) / math.comb(n, k)


def is_binary(scores: Scores) -> bool:
    return all(s in (0.0, 1.0) for v in scores.values() for s in v)


def _counts(scores: Scores, threshold: float) -> list[tuple[int, int]]:
    return [(len(v), sum(1 for s in v if s >= threshold)) for v in scores.values()]


def mean_pass_at_k(scores: Scores, k: int, threshold: float = 1.0) -> float:
    """pass@k averaged over tasks; a trial passes when its score >= threshold."""
    return _mean_over_tasks(scores, k, threshold, pass_at_k)


def mean_pass_hat_k(scores: Scores, k: int, threshold: float = 1.0) -> float:
    """pass^k averaged over tasks."""
    return _mean_over_tasks(scores, k, threshold, pass_hat_k)


def _mean_over_tasks(scores, k, threshold, fn) -> float:
    counts = _counts(_nonempty(scores), threshold)
    if min(n for n, _ in counts) < k:
        raise ValueError(f"k={k} exceeds the fewest samples of any task")
    return sum(fn(n, c, k) for n, c in counts) / len(counts)


def pass_at_k_curve(scores: Scores, threshold: float = 1.0) -> dict[int, float]:
    """{k: mean pass@k} for k = 1 .. the fewest samples any task has."""
    kmax = min(len(v) for v in _nonempty(scores).values())
    return {k: mean_pass_at_k(scores, k, threshold) for k in range(1, kmax + 1)}


def mean_reward(scores: Scores) -> float:
    """Mean over all trials (tasks with more trials weigh more, as in Miller's clustering)."""
    flat = [s for v in _nonempty(scores).values() for s in v]
    return sum(flat) / len(flat)


def clustered_se(scores: Scores) -> float:
    """Task-clustered standard error of the mean over trials.

    Miller 2024 eq.: SE^2 = (1/N^2) * sum_tasks (sum_{i in task} (s_i - mean))^2, N trials,
    times the small-sample factor T/(T-1) (T tasks) so that with equal k it equals
    sd(per-task means) / sqrt(T), the sample sd with T-1 in the denominator.
    """
    scores = _nonempty(scores)
    t = len(scores)
    if t < 2:
        return 0.0
    m = mean_reward(scores)
    n = sum(len(v) for v in scores.values())
    ss = sum(sum(s - m for s in v) ** 2 for v in scores.values())
    return math.sqrt(ss / n**2 * t / (t - 1))


@dataclass(frozen=True)
class MeanCI:
    """A mean with a two-sided confidence interval; `method` says how it was built."""

    mean: float
    ci_low: float
    ci_high: float
    se: float
    n_tasks: int
    k: float  # samples per task, or the mean count when tasks differ
    method: str = "wald"

    def to_dict(self) -> dict:
        return asdict(self)


def wilson_interval(p: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion p observed over n (possibly effective) trials."""
    if n <= 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def clustered_mean_ci(scores: Scores, confidence: float = 0.95,
                      bounds: tuple[float, float] | None = None) -> MeanCI:
    """Mean score with a task-clustered confidence interval.

    Binary scores: Wald (mean +- z*SE, clipped to [0, 1]) when there are enough tasks
    and passes/fails; otherwise Wilson on the effective sample size n_eff = p(1-p)/SE^2
    (the cluster design effect folded in; n_eff = T when p is 0 or 1).
    Other scores: mean +- t_{T-1} * SE, clipped to `bounds` (lo, hi) when the score is
    bounded (a reward in [0, 1] has no plausible mean outside it).
    """
    scores = _nonempty(scores)
    t = len(scores)
    sizes = [len(v) for v in scores.values()]
    k = sizes[0] if len(set(sizes)) == 1 else sum(sizes) / t
    m, se = mean_reward(scores), clustered_se(scores)
    if is_binary(scores):
        n_eff = _effective_n(m, se, t, sum(sizes))
        small = t < SMALL_N_TASKS or min(m, 1 - m) * n_eff < SMALL_EXPECTED_COUNT
        if small:
            lo, hi = wilson_interval(m, n_eff, confidence)
            return MeanCI(m, lo, hi, se, t, k, "wilson")
        z = NormalDist().inv_cdf(0.5 + confidence / 2)
        return MeanCI(m, max(0.0, m - z * se), min(1.0, m + z * se), se, t, k, "wald")
    q = t_ppf(0.5 + confidence / 2, t - 1) if t > 1 else math.inf
    half = q * se if se > 0 else (0.0 if t > 1 else math.inf)
    lo, hi = bounds or (-math.inf, math.inf)
    return MeanCI(m, max(lo, m - half), min(hi, m + half), se, t, k, "t")


def _effective_n(p: float, se: float, n_tasks: int, n_trials: int) -> float:
    if se <= 0 or p in (0.0, 1.0):
        return float(n_tasks)
    return min(float(n_trials), max(1.0, p * (1 - p) / se**2))


@dataclass(frozen=True)
class PairedDiff:
    """A - B on the tasks both jobs ran: per-task mean differences, paired t-test."""

    mean_a: float
    mean_b: float
    diff: float
    ci_low: float
    ci_high: float
    se: float
    correlation: float  # Pearson r of per-task means; nan if either side is constant
    p_value: float
    n_tasks: int
    only_a: int = 0  # tasks one job ran and the other did not (left out)
    only_b: int = 0
    method: str = "t"  # "t", or "zero-spread bound" when every task moved by the same amount

    def to_dict(self) -> dict:
        return asdict(self)


def paired_compare(a: Scores, b: Scores, confidence: float = 0.95) -> PairedDiff:
    """Compare two jobs on their common tasks (Miller 2024 sec. 4: paired differences).

    d_t = mean_a(t) - mean_b(t); SE = sd(d) / sqrt(T); CI and two-sided p-value from
    Student's t with T-1 degrees of freedom. Without spread (SE = 0) the CI is
    zero_spread_interval's and the p-value a sign test's.
    """
    a, b = _nonempty(a), _nonempty(b)
    common = sorted(set(a) & set(b))
    if not common:
        raise ValueError("the two jobs share no tasks")
    ma = [sum(a[t]) / len(a[t]) for t in common]
    mb = [sum(b[t]) / len(b[t]) for t in common]
    d = [x - y for x, y in zip(ma, mb)]
    n = len(d)
    dbar = sum(d) / n
    se = _sd(d) / math.sqrt(n) if n > 1 else 0.0
    if se > 1e-12:  # not float noise around equal differences
        q = t_ppf(0.5 + confidence / 2, n - 1)
        lo, hi = dbar - q * se, dbar + q * se
        p = 2 * (1 - t_cdf(abs(dbar) / se, n - 1))
        method = "t"
    else:  # every task moved by exactly dbar (or only one task): a t-interval would be a point
        lo, hi = zero_spread_interval(dbar, n, confidence)
        p = 1.0 if dbar == 0 else min(1.0, 2 * 0.5**n)  # sign test: all n tasks one way
        method = "zero-spread bound"
    return PairedDiff(sum(ma) / n, sum(mb) / n, dbar, lo, hi, se, _pearson(ma, mb), p, n,
                      len(set(a) - set(b)), len(set(b) - set(a)), method)


def paired_gain(before: Scores, after: Scores, name: str = "paired") -> dict[str, float]:
    """after - before on the same tasks (paired_compare), as a run's summary.json records it:
    NAME_diff, NAME_ci_low, NAME_ci_high, NAME_p and NAME_n_tasks."""
    d = paired_compare(after, before)
    return {f"{name}_diff": d.diff, f"{name}_ci_low": d.ci_low, f"{name}_ci_high": d.ci_high,
            f"{name}_p": d.p_value, f"{name}_n_tasks": d.n_tasks}


def zero_spread_interval(c: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """An interval for the mean difference when all n per-task differences equal c.

    No spread is seen, but unseen tasks may still differ. With 0 of n tasks off c, the
    exact (Clopper-Pearson) one-sided bound on the share of tasks that are off c is
    u = 1 - ((1 - confidence) / 2)^(1/n). Scores lie in [0, 1], so a task's difference lies
    in [-1, 1] and can sit at most 1 + c below c or 1 - c above it. Hence
    [c - u(1 + c), c + u(1 - c)]: never a point (n = 30 gives u = 0.116; n = 72, u = 0.05).
    """
    u = 1 - ((1 - confidence) / 2) ** (1 / n)
    return c - u * (1 + c), c + u * (1 - c)


def tasks_needed(delta: float, sd_diff: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Tasks needed for a paired two-sided test to detect a true difference `delta`.

    n = (z_{alpha/2} + z_beta)^2 * Var(d) / delta^2, where sd_diff is the sd of per-task
    differences (from a pilot paired_compare: se * sqrt(n_tasks)).
    """
    if delta == 0:
        raise ValueError("delta must be non-zero")
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return max(2, math.ceil(z * z * sd_diff**2 / delta**2))


def min_detectable_difference(n_tasks: int, sd_diff: float, alpha: float = 0.05,
                              power: float = 0.8) -> float:
    """The smallest true difference n_tasks paired tasks detect with the given power."""
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return z * sd_diff / math.sqrt(n_tasks)


def _nonempty(scores: Scores) -> Scores:
    out = {t: list(v) for t, v in scores.items() if v}
    if not out:
        raise ValueError("no scored trials")
    return out


def _sd(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def _pearson(xs: list[float], ys: list[float]) -> float:
    if len(xs) < 2:
        return math.nan
    sx, sy = _sd(xs), _sd(ys)
    if sx == 0 or sy == 0:
        return math.nan
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / (len(xs) - 1)
    return cov / (sx * sy)
