"""The canary gate: a candidate variant is promoted only if a paired, task-clustered eval shows it
is no worse than the baseline by more than a stated margin, and, when it claims to be lossless
(speculative decoding), only if its greedy outputs equal the baseline's on a probe set.

Non-inferiority: with d_t = mean_candidate(t) - mean_baseline(t) over the tasks both ran, the
candidate passes when the lower end of the 95% paired interval of mean(d) is above -margin
(a one-sided test at 2.5%). A wide interval (few tasks) therefore rolls back: "not shown
non-inferior" is not "shown worse", and the decision says which it was.

Insufficient evidence never promotes: fewer shared tasks than `min_tasks`, or differences with
no spread (or so little that the t-interval is widened to that bound). Without spread (every task
moved by the same amount) a t-interval is a point; the interval is then the exact zero-spread
bound (stats.zero_spread_interval), which needs about 72 tasks before its lower end clears -0.05. The two jobs must have run under the same conditions
(everything their config.json records but the model and endpoint), or the gate refuses.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import httpx

from posttrain.evals import stats

Scores = dict[str, list[float]]
MIN_TASKS = 20
WIDENED = "t, widened to the zero-spread bound"
# What may differ between a candidate's job and the baseline's: which model answered.
MAY_DIFFER = ("model", "base_url", "model_digest")


@dataclass
class CanaryDecision:
    candidate: str
    baseline: str
    margin: float
    n_tasks: int
    mean_candidate: float
    mean_baseline: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    lossless: bool
    probes_identical: int | None
    probes_total: int | None
    decision: str  # promote | rollback
    reason: str
    min_tasks: int = MIN_TASKS
    interval: str = "t"  # "t" | WIDENED | "zero-spread bound" (stats.paired_compare)

    def to_dict(self) -> dict:
        return asdict(self)


def decide(candidate: str, baseline: str, cand_scores: Scores, base_scores: Scores, margin: float,
           lossless: bool = False, probes: tuple[int, int] | None = None,
           min_tasks: int = MIN_TASKS) -> CanaryDecision:
    d = _no_narrower_than_no_spread(stats.paired_compare(cand_scores, base_scores))
    if lossless and probes is None:
        raise ValueError(f"`{candidate}` is marked lossless: its greedy probe results are needed")
    decision, reason = "rollback", _verdict(d, margin, min_tasks)
    if lossless and probes[0] != probes[1]:
        reason = f"lossless variant, but greedy outputs differ on {probes[1] - probes[0]} of {probes[1]} probes"
    elif reason.startswith("non-inferior"):
        decision = "promote"
    return CanaryDecision(candidate, baseline, margin, d.n_tasks, d.mean_a, d.mean_b, d.diff, d.ci_low, d.ci_high,
                          d.p_value, lossless, probes[0] if probes else None, probes[1] if probes else None,
                          decision, reason, min_tasks, d.method)


def _no_narrower_than_no_spread(d: stats.PairedDiff) -> stats.PairedDiff:
    """The paired t-interval, never narrower than the zero-spread bound for as many tasks. When one
    or two of many tasks differ the t-interval is narrower than the bound for no difference at
    all, yet seeing a few tasks move says no more about the unseen ones than seeing none move."""
    if d.method != "t":
        return d
    lo, hi = stats.zero_spread_interval(d.diff, d.n_tasks)
    if lo >= d.ci_low and hi <= d.ci_high:
        return d
    return replace(d, ci_low=min(lo, d.ci_low), ci_high=max(hi, d.ci_high), method=WIDENED)


def _verdict(d: stats.PairedDiff, margin: float, min_tasks: int) -> str:
    ci = f"[{d.ci_low:+.4f}, {d.ci_high:+.4f}]"
    if d.n_tasks < min_tasks:
        return (f"insufficient evidence: {d.n_tasks} shared tasks, fewer than min_tasks = {min_tasks}"
                f" (95% CI {ci})")
    spread = {"t": "", WIDENED: " (few tasks differ: the t-interval widened to the zero-spread bound)"}.get(
        d.method, f" (no spread: every task moved by {d.diff:+.4f}, so the CI is the exact zero-spread bound)")
    if d.ci_low > -margin:
        return f"non-inferior: 95% CI of the difference {ci} lies above -{margin}{spread}"
    if d.ci_high < -margin:
        return f"inferior: the whole 95% CI {ci} lies below -{margin}{spread}"
    if d.method != "t":
        return (f"insufficient evidence: 95% CI {ci} reaches below -{margin}{spread};"
                f" {d.n_tasks} tasks, more tasks narrow it")
    return f"not shown non-inferior: the 95% CI {ci} reaches below -{margin} ({d.n_tasks} tasks; more tasks narrow it)"


def differing_conditions(candidate_job: str | Path, baseline_job: str | Path) -> list[str]:
    """The recorded conditions (k, temperature, turn limit, ...) that differ between two jobs."""
    from posttrain.evals.conditions import diff_conditions
    from posttrain.evals.jobdir import open_existing

    a, b = open_existing(candidate_job).conditions(), open_existing(baseline_job).conditions()
    return [x for x in diff_conditions(a, b) if x.split(":")[0] not in MAY_DIFFER]


def job_scores(job: str | Path) -> Scores:
    """Per-task scores of a `posttrain eval` job, under the job's own denominator policy."""
    from posttrain.evals.jobdir import open_existing
    from posttrain.evals.summary import task_scores

    j = open_existing(job)
    return task_scores(j.records(), j.conditions().denominator)


def greedy_tokens(base_url: str, model: str, prompt: str, max_tokens: int, client: httpx.Client) -> list:
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "seed": 0}
    r = client.post(f"{base_url.rstrip('/')}/completions", json=body)
    r.raise_for_status()
    choice = r.json()["choices"][0]
    return choice.get("token_ids") or [choice.get("text")]


def probe_identity(url_a: str, model_a: str, url_b: str, model_b: str, prompts: list[str],
                   max_tokens: int = 32, api_key: str | None = None) -> tuple[int, int]:
    """(prompts whose greedy outputs are identical, prompts) between two endpoints."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(timeout=300, headers=headers) as client:
        same = sum(greedy_tokens(url_a, model_a, p, max_tokens, client) == greedy_tokens(url_b, model_b, p, max_tokens, client)
                   for p in prompts)
    return same, len(prompts)


def audit_fields(decision: CanaryDecision) -> dict:
    """The audit row of a decision (kind `canary`), as the gateway appends it."""
    return {"kind": "canary", "variant": decision.candidate, "route": f"canary {decision.baseline} -> {decision.candidate}",
            "status": 0, "detail": json.dumps(decision.to_dict())}
