"""report.html for a quickstart run, and for a `posttrain rl` run on single-turn tasks:
self-contained (plots inlined as PNG), no server."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import matplotlib

from posttrain.machine import cpu_line

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _reward_curve(history: list[dict], second: tuple[str, str] = ("zero_variance_groups",
                                                                  "zero-variance groups")) -> str:
    fig, ax = plt.subplots(figsize=(6, 3.2))
    steps = [h["step"] for h in history]
    ax.plot(steps, [h["reward_mean"] for h in history], marker="o", label="reward mean")
    ax.plot(steps, [h.get(second[0], float("nan")) for h in history], ls="--", label=second[1])
    ax.set_xlabel("GRPO step")
    ax.set_ylim(-0.02, 1.02)
    ax.legend()
    ax.grid(alpha=0.3)
    return _png(fig)


def _pass_rates(summary: dict) -> str:
    fig, ax = plt.subplots(figsize=(4, 3.2))
    for i, key in enumerate(("eval_before", "eval_after")):
        e = summary[key]
        ax.errorbar([i], [e["pass_at_1"]], yerr=[[e["pass_at_1"] - e["ci_low"]],
                                                 [e["ci_high"] - e["pass_at_1"]]],
                    fmt="o", capsize=8, markersize=8)
    ax.set_xticks([0, 1], ["SFT only", "SFT + GRPO"])
    ax.set_xlim(-0.6, 1.6)
    ax.set_ylim(0, 1)
    ax.set_ylabel("held-out pass@1 (95% CI)")
    ax.grid(alpha=0.3)
    return _png(fig)


def _row(label: str, e: dict) -> str:
    return (f"<tr><td>{label}</td><td>{e['pass_at_1']:.3f}</td>"
            f"<td>[{e['ci_low']:.3f}, {e['ci_high']:.3f}]</td>"
            f"<td>{e['n_tasks']}</td><td>{e['k']}</td></tr>")


def _verdict(summary: dict, better: str = "RL improved on SFT",
             worse: str = "RL made the agent worse") -> str:
    if summary["paired_ci_low"] > 0:
        return f"{better} (the interval excludes 0)."
    if summary["paired_ci_high"] < 0:
        return f"{worse} (the interval excludes 0)."
    return "no difference shown (the interval includes 0)."


def write_report(run_dir: Path, summary: dict, history: list[dict]) -> Path:
    samples = sorted((run_dir / "samples").glob("eval_after.txt"))
    example = html.escape(samples[0].read_text()[:6000]) if samples else "(none)"
    curve = f'<img src="data:image/png;base64,{_reward_curve(history)}">' if history else ""
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>posttrain run</title>
<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}}
td,th{{padding:4px 10px;border-bottom:1px solid #ddd}}pre{{background:#f6f6f6;padding:1em;
white-space:pre-wrap}}</style></head><body>
<h1>posttrain quickstart: {html.escape(run_dir.name)}</h1>
<p>wall time {summary['wall_s']} s, seed {summary['seed']}, on {html.escape(cpu_line(summary['cpu']))}</p>
<h2>Held-out pass@1</h2>
<table><tr><th></th><th>pass@1</th><th>95% CI (task-clustered)</th><th>tasks</th><th>k</th></tr>
{_row("SFT only", summary["eval_before"])}{_row("SFT + GRPO", summary["eval_after"])}</table>
<p><b>RL &minus; SFT</b> on the same held-out tasks and samples (paired, task-clustered):
{summary['paired_diff']:+.3f}, 95% CI [{summary['paired_ci_low']:+.3f}, {summary['paired_ci_high']:+.3f}],
p = {summary['paired_p']:.2g}: {_verdict(summary)}</p>
<img src="data:image/png;base64,{_pass_rates(summary)}">
<h2>GRPO reward</h2>{curve}
<h2>Example held-out transcripts (after RL)</h2><pre>{example}</pre>
</body></html>"""
    out = run_dir / "report.html"
    out.write_text(page, encoding="utf-8")
    return out


AGENT_ROWS = (("pass@1", "pass_at_1"), ("reward (partial credit)", "reward_mean"),
              ("turns per episode", "turns_mean"), ("tool calls per episode", "tool_calls_mean"),
              ("parse failures per episode", "parse_failures_mean"))


def _heldout_table(s: dict, b: dict, a: dict, verdict: str) -> str:
    """Single-turn tasks: partial and strict scores; agent tasks: pass@1 and what the agent did."""
    if "strict_mean" not in b:
        rows = "".join(f"<tr><td>{label}</td><td>{b.get(k, 0.0):.3f}</td><td>{a.get(k, 0.0):.3f}</td></tr>"
                       for label, k in AGENT_ROWS)
        return (f"<h2>Held-out episodes ({b['k']} per task, {b['n_tasks']} tasks)</h2><table><tr><th></th>"
                f"<th>before RL</th><th>after RL</th></tr>{rows}</table><p><b>after &minus; before</b>, "
                f"paired by task: pass@1 {s['paired_diff']:+.3f}, 95% CI [{s['paired_ci_low']:+.3f}, "
                f"{s['paired_ci_high']:+.3f}], p = {s['paired_p']:.2g}: {verdict}</p>")
    return f"""<h2>Held-out score (greedy, one reply per task)</h2>
<table><tr><th></th><th>partial (fraction of constraints met)</th><th>95% CI</th><th>strict (all met)</th><th>tasks</th></tr>
<tr><td>before RL</td><td>{b['reward_mean']:.3f}</td><td>[{b['ci_low']:.3f}, {b['ci_high']:.3f}]</td>
<td>{b['strict_mean']:.3f}</td><td>{b['n_tasks']}</td></tr>
<tr><td>after RL</td><td>{a['reward_mean']:.3f}</td><td>[{a['ci_low']:.3f}, {a['ci_high']:.3f}]</td>
<td>{a['strict_mean']:.3f}</td><td>{a['n_tasks']}</td></tr></table>
<p><b>after &minus; before</b>, paired by task: partial {s['paired_diff']:+.3f}, 95% CI
[{s['paired_ci_low']:+.3f}, {s['paired_ci_high']:+.3f}], p = {s['paired_p']:.2g}: {verdict}
Strict {s['paired_strict_diff']:+.3f}, 95% CI [{s['paired_strict_ci_low']:+.3f}, {s['paired_strict_ci_high']:+.3f}].</p>"""


def write_rl_report(run_dir: Path, summary: dict, history: list[dict]) -> Path:
    """report.html of `posttrain rl` with a held-out comparison: before and after RL (single-turn
    tasks: partial and strict scores; agent tasks: pass@1, turns, tool calls, parse failures),
    their paired difference, the training reward curve."""
    s, b, a = summary, summary["eval_before"], summary["eval_after"]
    verdict = _verdict(s, "RL improved the held-out score", "RL made the held-out score worse")
    curve = f'<img src="data:image/png;base64,{_reward_curve(history, ("pass_rate", "all constraints met"))}">' \
        if history else "(no steps)"
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>posttrain rl</title>
<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}}
td,th{{padding:4px 10px;border-bottom:1px solid #ddd}}</style></head><body>
<h1>posttrain rl: {html.escape(run_dir.name)}</h1>
<p>{s['steps']} steps, {s['trajectories']} trajectories, wall time {s['wall_s']} s, seed {s['seed']},
on {html.escape(cpu_line(s['cpu']))}</p>
{_heldout_table(s, b, a, verdict)}
<h2>Training reward</h2>{curve}
<p>Final policy (HF checkpoint directory): <code>{html.escape(str(s.get('policy', '')))}</code></p>
</body></html>"""
    out = run_dir / "report.html"
    out.write_text(page, encoding="utf-8")
    return out
