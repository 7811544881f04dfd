"""Matplotlib figures for eval reports, each returned as a base64 PNG for inline HTML."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from posttrain.evals import taxonomy  # noqa: E402
from posttrain.evals.record import TrialRecord  # noqa: E402

PHASES = ("setup_s", "model_s", "sandbox_s", "verifier_s")


def to_png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def pass_at_k_curve(curves: dict[str, dict]) -> str:
    """curves: {label: {"pass_at_k": {k: v}, "pass_hat_k": {k: v}}}."""
    fig, ax = plt.subplots(figsize=(5, 3.4))
    for label, s in curves.items():
        ks = [int(k) for k in s["pass_at_k"]]
        ax.plot(ks, list(s["pass_at_k"].values()), marker="o", label=f"{label} pass@k")
        if s.get("pass_hat_k"):
            ax.plot(ks, list(s["pass_hat_k"].values()), ls="--", marker=".",
                    label=f"{label} pass^k")
    ax.set(xlabel="k", ylabel="probability", ylim=(-0.02, 1.02), title="pass@k and pass^k")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return to_png(fig)


def task_heatmap(records: list[TrialRecord], k: int) -> str:
    """Tasks (rows) x attempts (columns), coloured by score; grey where no trial is recorded."""
    tasks = sorted({r.task_name for r in records})
    grid = [[float("nan")] * k for _ in tasks]
    row = {t: i for i, t in enumerate(tasks)}
    for r in records:
        if r.attempt < k:
            grid[row[r.task_name]][r.attempt] = taxonomy.score(r.status, r.reward)
    fig, ax = plt.subplots(figsize=(max(3.0, 0.4 * k + 2.5), max(2.0, 0.18 * len(tasks) + 1)))
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="lightgrey")
    im = ax.imshow(grid, aspect="auto", cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
    ax.set_yticks(range(len(tasks)), tasks, fontsize=6 if len(tasks) > 20 else 8)
    ax.set_xticks(range(k), [str(i) for i in range(k)])
    ax.set(xlabel="attempt", title="score per task and attempt")
    fig.colorbar(im, ax=ax, fraction=0.04)
    return to_png(fig)


def reward_vs_tokens(records: list[TrialRecord]) -> str:
    fig, ax = plt.subplots(figsize=(5, 3.4))
    for status in taxonomy.STATUSES:
        pts = [(r.n_input_tokens + r.n_output_tokens, taxonomy.score(r.status, r.reward))
               for r in records if r.status == status]
        if pts:
            ax.scatter(*zip(*pts), s=14, alpha=0.6, label=status)
    ax.set(xlabel="tokens (input + output, all calls)", ylabel="score", title="reward vs tokens")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return to_png(fig)


def latency_breakdown(latencies: dict[str, dict]) -> str:
    """latencies: {label: mean seconds per phase}; stacked horizontal bars."""
    fig, ax = plt.subplots(figsize=(5.5, 0.6 * len(latencies) + 1.2))
    labels = list(latencies)
    left = [0.0] * len(labels)
    for phase in PHASES:
        vals = [latencies[lb].get(phase, 0.0) for lb in labels]
        ax.barh(labels, vals, left=left, label=phase.removesuffix("_s"))
        left = [a + b for a, b in zip(left, vals)]
    ax.set(xlabel="mean seconds per trial", title="where the time goes")
    ax.legend(fontsize=7, ncol=4, loc="lower right")
    return to_png(fig)


def paired_scatter(means_a: list[float], means_b: list[float], a: str, b: str) -> str:
    """Per-task mean scores, A against B; points off the diagonal are the paired differences."""
    fig, ax = plt.subplots(figsize=(4, 4))
    ax.scatter(means_b, means_a, s=18, alpha=0.6)
    ax.plot([0, 1], [0, 1], color="grey", lw=1)
    ax.set(xlabel=f"B: {b}", ylabel=f"A: {a}", xlim=(-0.05, 1.05), ylim=(-0.05, 1.05),
           title="per-task mean score")
    ax.grid(alpha=0.3)
    return to_png(fig)
