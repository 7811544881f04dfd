"""`posttrain validate DIR`: find broken, flaky, hackable and weakly verified tasks.

    posttrain validate tasks/ --out validation.json --jobs 4
    posttrain validate tasks/ --policy runs/ckpt --k 8      # also calibrate difficulty
    posttrain validate tasks/ --mutation-budget 4          # at most 4 mutants per task
Writes the manifest (--out, NAME.json) and its report NAME.html beside it; exits 1 if any task is
broken. Rerunning the same command resumes: finished checks are not run again.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from posttrain.commands.checks import existing_dir, fraction, writable_file
from posttrain.validate.config import MAX_MUTANTS


def _policy(path: str, k: int, temperature: float, seed: int, backend: str):
    from posttrain.agent.config import AgentConfig
    from posttrain.agent.framing import framer_for
    from posttrain.engine.base import SamplingParams
    from posttrain.engine.paged.local import LocalEngine
    from posttrain.errors import ConfigError
    from posttrain.models.tiny import load_policy
    from posttrain.validate.job import Policy

    if not (Path(path) / "config.json").is_file():
        raise ConfigError(f"--policy {path!r} is not a checkpoint directory (no config.json)")
    model, tokenizer = load_policy(path)
    ctx = int(getattr(model.config, "max_position_embeddings", 2048) or 2048)
    return Policy(str(Path(path).resolve()), LocalEngine(model, tokenizer), framer_for(tokenizer),
                  k, SamplingParams(temperature=temperature, seed=seed),
                  AgentConfig(max_context=ctx, sandbox_backend=backend))


def _summary(console: Console, manifest: dict, out: Path) -> None:
    from posttrain.validate.job import report_path

    table = Table("task", "status", "reason", "difficulty")
    for t in manifest["tasks"]:
        if t["status"] != "ok" or t.get("difficulty"):
            table.add_row(t["id"], t["status"], "; ".join(t["reasons"])[:120],
                          (t.get("difficulty") or {}).get("label", ""))
    if table.row_count:
        console.print(table)
    counts = ", ".join(f"{k} {v}" for k, v in manifest["counts"].items() if v)
    console.print(f"{len(manifest['tasks'])} tasks: {counts}")
    console.print(f"manifest: {out}  report: {report_path(out)}")


def validate(
    path: Path = typer.Argument(..., help="A task directory, or a directory of them."),
    out: Path = typer.Option(Path("validation.json"), "--out", help="Manifest to write (JSON); its report is the same name with .html."),
    jobs: int = typer.Option(1, "--jobs", "-n", min=1, help="Tasks validated concurrently."),
    runs: int = typer.Option(5, "--runs", min=1, help="Oracle runs; any failure = flaky."),
    min_strength: float = typer.Option(0.7, callback=fraction, help="Mutant kill share below this = weak-verifier."),
    pass_threshold: float = typer.Option(1.0, callback=fraction, help="Reward at or above this counts as solved."),
    mutation_budget: int = typer.Option(8, "--mutation-budget", min=0, max=MAX_MUTANTS, help="Most mutants run per task (each a fresh sandbox); 0 skips the mutation check."),
    backend: str = typer.Option("bwrap", help="Sandbox backend."),
    policy: Optional[str] = typer.Option(None, help="Checkpoint dir to calibrate difficulty with."),
    k: int = typer.Option(8, "-k", min=1, help="Episodes per task for difficulty calibration."),
    temperature: float = typer.Option(1.0, min=0.0, help="Sampling temperature for calibration."),
    seed: int = typer.Option(0, help="Sampling seed for calibration."),
    fresh: bool = typer.Option(False, help="Forget saved checks and validate from scratch."),
) -> None:
    """Validate tasks: hygiene, oracle xN, no-op/trivial agents, hack probes, mutants, determinism."""
    from posttrain.validate.config import ValidateConfig
    from posttrain.validate.job import run_validation, state_dir_for

    if not path.is_file():
        existing_dir(path, "the task path")
    writable_file(out, "--out")
    cfg = ValidateConfig(oracle_runs=runs, min_strength=min_strength, pass_threshold=pass_threshold,
                         max_mutants=mutation_budget, backend=backend)
    if fresh:
        shutil.rmtree(state_dir_for(out), ignore_errors=True)
    pol = _policy(policy, k, temperature, seed, backend) if policy else None
    console = Console()
    columns = (TextColumn("validate"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.description}"))
    with Progress(*columns, console=console, transient=False) as bar:
        ids: dict[str, int] = {}
        seen: dict[str, int] = {}

        def on_start(n: int) -> None:
            ids["bar"] = bar.add_task("", total=n)

        def on_task(report) -> None:
            seen[report.status] = seen.get(report.status, 0) + 1
            desc = " ".join(f"{s}:{c}" for s, c in sorted(seen.items()))
            bar.update(ids["bar"], advance=1, description=desc)

        manifest = run_validation(path, cfg, out, jobs, pol, on_start, on_task)
    _summary(console, manifest, out)
    if manifest["counts"].get("broken"):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
