"""`posttrain plan RUN_DIR --devices N`: predict a cluster's behaviour from a run's costs (docs/schedule.md)."""

from __future__ import annotations

import json
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from posttrain.commands.checks import positive, probability


def plan(
    run_dir: str = typer.Argument(..., help="A finished `posttrain rl` run directory (its costs)."),
    devices: int = typer.Option(8, help="Accelerators to split between engines and trainer ranks."),
    sandbox_slots: Optional[int] = typer.Option(None, callback=positive,
                                                help="Episodes that can verify at once (default: unlimited)."),
    train_scaling: float = typer.Option(1.0, callback=probability,
                                        help="Speed-up per extra trainer rank, in (0, 1] (1 = linear)."),
    top: int = typer.Option(8, help="Rows to show."),
    json_out: Optional[str] = typer.Option(None, "--json", help="Write every candidate here."),
) -> None:
    """Recommend the rollout:train split, staleness bound and over-provisioning."""
    from posttrain.commands.checks import writable_file
    from posttrain.errors import ConfigError
    from posttrain.schedule.planner import Cluster, fit_costs, recommend

    if devices < 2:
        raise ConfigError("--devices must be at least 2 (one engine and one trainer rank)")
    if json_out:
        writable_file(json_out, "--json")
    costs, rollout = fit_costs(run_dir)
    rows = recommend(costs, rollout, Cluster(devices, sandbox_slots, train_scaling))
    console = Console()
    console.print(f"costs from {run_dir}: train step {costs.train_s:.3f} s, generation "
                  f"{sum(costs.gen_s) / len(costs.gen_s):.3f} s/group, domains {sorted(costs.verify_s)}")
    table = Table("engines", "trainer ranks", "staleness", "overprov.", "groups/s", "trainer idle", "wasted")
    for r in rows[:top]:
        table.add_row(str(r["engines"]), str(r["trainer_ranks"]), str(r["max_staleness"]),
                      over_text(r), f"{r['groups_per_s']:.2f}", f"{r['trainer_idle_frac']:.1%}",
                      f"{r['wasted_frac']:.1%}")
    console.print(table)
    best = rows[0]
    console.print(f"recommended: {best['engines']} engines : {best['trainer_ranks']} trainer ranks, "
                  f"max_staleness {best['max_staleness']}, overprovision {over_text(best)}")
    if json_out:
        with open(json_out, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2)


def register(app: typer.Typer) -> None:
    app.command()(plan)


def over_text(row: dict) -> str:
    hedge, carry = row.get("hedge_after", 0.0), row.get("carry_staleness", 0)
    text = f"{row['overprovision']} (hedge_after {hedge})" if hedge else str(row["overprovision"])
    return text[:-1] + f", carry_staleness {carry})" if carry else text
