"""`posttrain eval report JOB`: a self-contained HTML page (plots inline) from a job directory,
with each trial's transcript turn by turn (timings, exit codes) linked to its trajectory.json."""

from __future__ import annotations

import html
import json
from pathlib import Path

from posttrain.evals import plots
from posttrain.evals.jobdir import open_existing, write_json
from posttrain.evals.summary import summarize

CSS = ("body{font-family:sans-serif;max-width:980px;margin:2em auto;color:#222}"
       "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
       "font-size:13px;text-align:left}img{max-width:100%}.note{color:#555;font-size:13px}")


def esc(x) -> str:
    return html.escape(str(x))


def kv_table(rows: list[tuple[str, object]]) -> str:
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def img(b64: str, alt: str) -> str:
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{b64}">'


def page(title: str, body: str) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{esc(title)}</h1>{body}</body></html>")


def headline_rows(s: dict) -> list[tuple[str, object]]:
    f = (lambda x: "-" if x is None else f"{x:.3f}")
    d = s["denominator"]
    rows = [("mean reward (95% CI)", f"{f(s['mean_reward'])}  [{f(s['ci_low'])}, {f(s['ci_high'])}]"
             f"  ({s['ci_method']}, task-clustered SE {f(s['se'])})"),
            ("tasks x samples", f"{s['n_tasks']} x {s['k']} = {s['n_trials']} trials "
             f"of {s['n_trials_planned']} planned")]
    rows += [(f"pass@{k}", f(v)) for k, v in s["pass_at_k"].items()]
    rows += [("denominator", f"policy {d['policy']}: {d['counted']} counted, {d['excluded']} excluded"),
             ("status counts", ", ".join(f"{k} {v}" for k, v in s["counts"].items() if v)),
             ("tokens in / out", f"{s['tokens']['input']} / {s['tokens']['output']}"),
             ("cost (USD)", "no price table" if s["cost"]["total_usd"] is None
              else f"{s['cost']['total_usd']:.4f}")]
    return rows


def domain_rows(per_domain: dict) -> str:
    f = (lambda x: "-" if x is None else f"{x:.3f}")
    head = "<tr><th>domain</th><th>difficulty</th><th>tasks</th><th>mean</th><th>95% CI</th></tr>"
    rows = []
    for domain, d in per_domain.items():
        for level, g in [("all", d)] + list(d["by_difficulty"].items()):
            rows.append(f"<tr><td>{esc(domain)}</td><td>{esc(level)}</td><td>{g['n_tasks']}</td>"
                        f"<td>{f(g['mean'])}</td><td>[{f(g['ci_low'])}, {f(g['ci_high'])}]</td></tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def trial_rows(records) -> str:
    head = "<tr><th>trial</th><th>status</th><th>reward</th><th>turns</th><th>tokens</th>" \
           "<th>seconds</th><th>error</th></tr>"
    body = "".join(
        f"<tr><td><a href='#{esc(r.trial_name)}'>{esc(r.trial_name)}</a></td><td>{esc(r.status)}</td>"
        f"<td>{esc(r.reward)}</td><td>{r.n_turns}</td><td>{r.n_input_tokens + r.n_output_tokens}</td>"
        f"<td>{r.timings.get('total_s', 0):.1f}</td><td>{esc(r.error[:160])}</td></tr>"
        for r in records)
    return f"<table>{head}{body}</table>"


TURN_COLUMNS = ("at_s", "kind", "action", "exit_code", "model_s", "tool_s", "tokens_in", "tokens_out")


def transcript(job_path: Path, trial: str) -> str:
    """One trial's turns with their timings, and a link to its trajectory.json."""
    path = job_path / trial / "agent" / "trajectory.json"
    turns = json.loads(path.read_text()).get("turns", []) if path.is_file() else []
    head = "".join(f"<th>{c}</th>" for c in ("turn",) + TURN_COLUMNS)
    rows = "".join("<tr>" + f"<td>{i}</td>" + "".join(
        f"<td>{esc('' if t.get(c) is None else str(t[c])[:120])}</td>" for c in TURN_COLUMNS) + "</tr>"
        for i, t in enumerate(turns))
    return (f"<details id='{esc(trial)}'><summary>{esc(trial)}: {len(turns)} turns "
            f"(<a href='{esc(trial)}/agent/trajectory.json'>transcript</a>)</summary>"
            f"<table><tr>{head}</tr>{rows}</table></details>")


def write_report(job_path: Path, out: Path | None = None) -> tuple[Path, dict]:
    """Write the job's report.html and summary.json; returns (html path, summary)."""
    job = open_existing(job_path)
    c, records = job.conditions(), job.records()
    previous = job.path / "result.json"
    last_run = json.loads(previous.read_text()).get("last_run") if previous.is_file() else None
    s = summarize(records, c, len(c.task_ids), last_run)
    write_json(job.path / "summary.json", s)
    body = kv_table(headline_rows(s))
    if s.get("per_domain"):
        body += "<h2>Per domain</h2>" + domain_rows(s["per_domain"])
    body += ("<p class='note'>The interval is for the mean over tasks like these: trials of a "
             "task are correlated, so the standard error is clustered by task. Two models "
             "differ for real only if a paired comparison (posttrain eval compare) says so; "
             "overlapping intervals alone do not decide it. See docs/eval.md.</p>")
    if records:
        body += "<h2>Plots</h2>" + img(plots.pass_at_k_curve({job.path.name: s}), "pass@k")
        body += img(plots.task_heatmap(records, c.k), "per-task heat map")
        body += img(plots.reward_vs_tokens(records), "reward vs tokens")
        body += img(plots.latency_breakdown({job.path.name: s["latency"]["mean_per_trial"]}),
                    "latency breakdown")
    body += "<h2>Conditions</h2>" + kv_table(
        [(k, v) for k, v in c.to_dict().items() if k != "task_ids"])
    body += "<h2>Trials</h2>" + trial_rows(records)
    body += "<h2>Transcripts</h2>" + "".join(transcript(job.path, r.trial_name) for r in records)
    path = out or job.path / "report.html"
    path.write_text(page(f"eval report: {job.path.name}", body), encoding="utf-8")
    return path, s
