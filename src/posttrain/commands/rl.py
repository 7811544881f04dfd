"""`posttrain rl CONFIG.toml`: asynchronous RL with bounded staleness (docs/rl.md)."""

from __future__ import annotations

from typing import Optional

import typer
from rich.console import Console


def rl(
    ctx: typer.Context,
    config: Optional[str] = typer.Argument(None, help="TOML config, e.g. examples/rl.toml; every key has a default."),
    set_: list[str] = typer.Option([], "--set", help="Override a key, e.g. --set rollout.steps=5."),
    default: bool = typer.Option(False, "--default", help="Run the built-in default config (no file, no --set)."),
    resume: bool = typer.Option(False, help="Continue from the run's latest checkpoint."),
    overwrite: bool = typer.Option(False, help="Replace an existing run directory."),
    replay: bool = typer.Option(False, help="Re-train on the run's recorded batches (no rollouts)."),
) -> None:
    """Train a policy with RL: rollouts and training as two loops around a buffer."""
    from posttrain.recipes.rl.run import replay_rl, run_rl
    from posttrain.errors import PosttrainError
    from posttrain.recipes.rl.config import load_rl_config

    if not (config or set_ or default or resume or replay):    # a bare `posttrain rl` is not a 15-minute run
        typer.echo(ctx.get_help())
        raise PosttrainError("give a config (e.g. examples/rl.toml), --set KEY=VALUE, or --default "
                             "to run the built-in default")
    if resume and overwrite:
        raise PosttrainError("--resume continues a run and --overwrite replaces it: pass one of them")
    cfg = load_rl_config(config, list(set_), resume=resume)
    console = Console()
    if replay:
        console.print(f"replayed trainer metrics: {replay_rl(cfg)}")
        return
    mode = "sync" if cfg.rollout.max_staleness == 0 else f"async, max_staleness {cfg.rollout.max_staleness}"
    console.print(f"[bold]posttrain rl[/bold] → {cfg.run_dir} ({mode}, loss {cfg.algo.loss})")
    s = run_rl(cfg, resume=resume, overwrite=overwrite, console=console)
    if s.get("preempted"):
        console.print(f"SIGTERM: checkpointed after step {s['steps']}; continue with --resume")
        raise typer.Exit(143)             # what a process killed by SIGTERM gives (docs/rl.md)
    for label, key in (("before", "eval_before"), ("after ", "eval_after")):
        e = s[key]
        if e:
            metric = "pass@1" if "pass_at_1" in e else "reward"
            value = e.get("pass_at_1", e.get("reward_mean"))
            console.print(f"held-out {metric} {label} = {value:.3f} [{e['ci_low']:.3f}, {e['ci_high']:.3f}]")
    if "paired_diff" in s:
        strict = (f"held-out strict before = {s['heldout_strict_before']:.3f}, after = "
                  f"{s['heldout_strict_after']:.3f}; " if "heldout_strict_before" in s else "")
        console.print(f"{strict}after - before (paired) = {s['paired_diff']:+.3f} [{s['paired_ci_low']:+.3f}, "
                      f"{s['paired_ci_high']:+.3f}]; report: {cfg.run_dir / 'report.html'}")
    if "policy" in s:
        console.print(f"final policy (HF checkpoint): {s['policy']}")
    console.print(f"{s['trajectories']} trajectories in {s['wall_s']:.0f} s; metrics: {cfg.run_dir / 'metrics.jsonl'}")


def register(app: typer.Typer) -> None:
    app.command()(rl)
