"""`posttrain tasks ...`: generate built-in suites and run task oracles."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

tasks_app = typer.Typer(help="Work with Harbor-format task directories.", no_args_is_help=True)


@tasks_app.command("generate")
def generate(
    out: Path = typer.Argument(..., help="Directory to write the task directories into."),
    suite: str = typer.Option("terminal-basics", help="Built-in suite to generate."),
    n: int = typer.Option(64, min=1, help="Number of tasks."),
    seed: int = typer.Option(0, help="Seed; the same seed gives the same tasks."),
    split: str = typer.Option("train", help="Prefix of the task ids (train, heldout, ...)."),
) -> None:
    """Write a generated suite as ordinary task directories."""
    from posttrain.errors import PosttrainError
    from posttrain.tasks.suites import terminal_basics

    if suite != terminal_basics.SUITE:
        raise PosttrainError(f"unknown suite {suite!r}; known: {terminal_basics.SUITE}")
    tasks = terminal_basics.generate(out, n, seed=seed, split=split)
    Console().print(f"wrote {len(tasks)} tasks to {out}")


@tasks_app.command("oracle")
def oracle(
    path: Path = typer.Argument(..., help="A task directory, or a directory of them."),
    backend: str = typer.Option("bwrap", help="Sandbox backend (bwrap, or process to debug)."),
) -> None:
    """Run each task's solution/solve.sh in a sandbox, then its tests; print the rewards."""
    from posttrain.agent.trial import open_task_sandbox, run_oracle, verify
    from posttrain.tasks import load_tasks

    table = Table("task", "oracle exit", "reward", "status", "error")
    failures = 0
    for task in load_tasks(path):
        with open_task_sandbox(task, backend) as sandbox:
            result = run_oracle(task, sandbox)
            verdict = verify(task, sandbox)
        failures += verdict.status != "ok" or verdict.reward < 1
        table.add_row(task.id, str(result.exit_code), f"{verdict.reward:g}", verdict.status,
                      verdict.error)
    Console().print(table)
    if failures:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")
