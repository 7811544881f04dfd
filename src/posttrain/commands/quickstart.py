"""`posttrain quickstart`: the whole loop on the embedded default, in minutes on a CPU."""

from __future__ import annotations

from typing import Optional

import typer
from rich.console import Console


def quickstart(
    config: Optional[str] = typer.Option(None, "--config", help="TOML file with config keys."),
    preset: str = typer.Option("default", help="default | quick (a short smoke run)."),
    name: Optional[str] = typer.Option(None, help="Run name; results go to runs/NAME."),
    set_: list[str] = typer.Option([], "--set", help="Override a key, e.g. --set rl.steps=10."),
    overwrite: bool = typer.Option(False, help="Replace an existing run directory."),
) -> None:
    """Generate tasks, SFT a tiny model, evaluate, train it with GRPO, evaluate again."""
    from posttrain.machine import cpu_line
    from posttrain.recipes.quickstart.config import load_config
    from posttrain.recipes.quickstart.run import run_quickstart

    overrides = list(set_) + ([f'name="{name}"'] if name else [])
    cfg = load_config(config, preset, overrides)
    console = Console()
    console.print(f"[bold]posttrain quickstart[/bold] → {cfg.run_dir}")
    s = run_quickstart(cfg, overwrite=overwrite, console=console)
    for label, key in (("SFT only  ", "eval_before"), ("SFT + GRPO", "eval_after")):
        e = s[key]
        console.print(f"{label} held-out pass@1 = {e['pass_at_1']:.3f} "
                      f"[{e['ci_low']:.3f}, {e['ci_high']:.3f}]  ({e['n_tasks']} tasks × {e['k']})")
    console.print(f"RL - SFT (paired, same tasks and samples) = {s['paired_diff']:+.3f} "
                  f"[{s['paired_ci_low']:+.3f}, {s['paired_ci_high']:+.3f}], p = {s['paired_p']:.2g}")
    console.print(f"done in {s['wall_s']:.0f} s on {cpu_line(s['cpu'])}; report: {cfg.run_dir / 'report.html'}")


def register(app: typer.Typer) -> None:
    app.command()(quickstart)
