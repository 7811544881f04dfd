"""Terminal output for eval jobs: a progress bar while trials run, rich tables after."""

from __future__ import annotations

import math
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from posttrain.evals.stats import PairedDiff


@contextmanager
def progress_hooks(console: Console, live: bool = True):
    """(on_start, on_trial) callbacks that drive one progress bar over the job's trials (not
    live: a line per trial instead, for a terminal that also asks questions)."""
    progress = Progress(TextColumn("eval"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("{task.fields[info]}"), console=console, disable=not live)
    state = {"id": None, "passed": 0, "done": 0}

    def on_start(path: Path, total: int, already: int) -> None:
        console.print(f"job {path}  ({already}/{total} trials already done)")
        state.update(path=path, total=total, already=already)
        state["id"] = progress.add_task("eval", total=total, completed=already, info="")

    def on_trial(rec) -> None:
        state["done"] += 1
        state["passed"] += rec.status == "passed"
        info = f"passed {state['passed']}/{state['done']} this run  last: {rec.status}"
        progress.update(state["id"], advance=1, info=info)
        if not live:
            console.print(f"trial {rec.task_name} #{rec.attempt}: {rec.status}  ({info})")

    try:
        with progress:
            yield on_start, on_trial
    except KeyboardInterrupt:           # Ctrl-C, and SIGTERM (errors.Terminated): say what is kept
        if state["id"] is not None:
            saved = state["already"] + state["done"]
            console.print(f"stopped: {saved} of {state['total']} trials saved in {state['path']}; "
                          "rerun the same command to resume", markup=False, highlight=False)
        raise


def _fmt(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def print_summary(console: Console, s: dict, job: Path) -> None:
    t = Table(title=f"{job.name}: {s['model']} ({s['protocol']})", show_header=False)
    t.add_column("metric", style="bold")
    t.add_column("value")
    ci = f"[{_fmt(s['ci_low'])}, {_fmt(s['ci_high'])}] ({s['ci_method']}, 95%)"
    t.add_row("mean reward", f"{_fmt(s['mean_reward'])}  {ci}")
    for k, v in s["pass_at_k"].items():
        t.add_row(f"pass@{k}", _fmt(v))
    t.add_row("tasks x k", f"{s['n_tasks']} x {s['k']}  ({s['n_trials']}/{s['n_trials_planned']} trials)")
    d = s["denominator"]
    t.add_row("denominator", f"{d['policy']}: {d['counted']} counted, {d['excluded']} excluded")
    t.add_row("status", "  ".join(f"{k}={v}" for k, v in s["counts"].items() if v))
    tok = s["tokens"]
    t.add_row("tokens in/out", f"{tok['input']} / {tok['output']}")
    cost = s["cost"]["total_usd"]
    t.add_row("cost", "no price table" if cost is None else f"${cost:.4f}")
    lat = s["latency"]["mean_per_trial"]
    t.add_row("mean s/trial", f"model {lat['model_s']:.2f}  sandbox {lat['sandbox_s']:.2f}  "
              f"verifier {lat['verifier_s']:.2f}  total {lat['total_s']:.2f}")
    if s.get("last_run", {}).get("trials_run"):
        lr = s["last_run"]
        t.add_row("this run", f"{lr['trials_run']} trials in {lr['wall_s']:.1f} s "
                  f"({lr['trials_per_min']:.1f}/min at --jobs {lr['jobs']})")
    console.print(t)
    if len(s.get("per_domain", {})) > 1 or any(len(d["by_difficulty"]) > 1
                                               for d in s.get("per_domain", {}).values()):
        console.print(domain_table(s["per_domain"]))


def print_comparison(console: Console, d: PairedDiff, a: str, b: str, result: dict) -> None:
    t = Table(title=f"A = {a}   B = {b}  (paired by task)")
    for col in ("n tasks", "mean A", "mean B", "A - B", "95% CI", "p", "corr"):
        t.add_column(col)
    t.add_row(str(d.n_tasks), _fmt(d.mean_a), _fmt(d.mean_b), _fmt(d.diff),
              f"[{_fmt(d.ci_low)}, {_fmt(d.ci_high)}]", _fmt(d.p_value, 4), _fmt(d.correlation))
    console.print(t)
    verdict = ("the difference is significant at 5%" if d.p_value < 0.05
               else "the difference is not significant at 5% (CI includes 0)")
    console.print(f"{verdict}; tasks only in A: {d.only_a}, only in B: {d.only_b}")
    if d.method != "t":
        console.print(f"no spread: every task moved by {_fmt(d.diff)}; the CI is the exact zero-spread bound")
    mdd = result["min_detectable_difference_80pct_power"]
    console.print("smallest difference these tasks detect (80% power, 5%): "
                  + (_fmt(mdd) if mdd is not None else "- (the differences have no spread)"))
    differing = result["conditions_differing"]
    console.print("conditions that differ besides the model: " + ("; ".join(differing) if differing else "none"),
                  markup=False)


def domain_table(per_domain: dict) -> Table:
    """Mean reward with its 95% CI per domain and per difficulty within it."""
    t = Table("domain", "difficulty", "tasks", "mean reward", "95% CI", title="per domain")
    for domain, d in per_domain.items():
        t.add_row(domain, "all", str(d["n_tasks"]), _fmt(d["mean"]),
                  f"[{_fmt(d['ci_low'])}, {_fmt(d['ci_high'])}]")
        for level, g in d["by_difficulty"].items():
            t.add_row("", level, str(g["n_tasks"]), _fmt(g["mean"]),
                      f"[{_fmt(g['ci_low'])}, {_fmt(g['ci_high'])}]")
    return t
