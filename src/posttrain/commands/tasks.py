"""`posttrain tasks ...`: scaffold, list, import and generate tasks; run their oracles.

    posttrain tasks new my-task --dir tasks/       # a working task to edit
    posttrain tasks list tasks/ --manifest validation.json
    posttrain tasks import-tb1 terminal-bench/tasks tasks/
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

tasks_app = typer.Typer(help="Work with Harbor-format task directories.", no_args_is_help=True)


@tasks_app.command("generate")
def generate(
    out: Path = typer.Argument(..., help="Directory to write the task directories into."),
    suite: str = typer.Option("terminal-basics", help="Built-in suite (terminal-basics, finance, "
                              "longctx, cad, ...; see docs/domains.md)."),
    n: int = typer.Option(64, min=1, help="Number of tasks."),
    seed: int = typer.Option(0, help="Seed; the same seed gives the same tasks."),
    split: str = typer.Option("train", help="Prefix of the task ids (train, heldout, ...)."),
    knob: list[str] = typer.Option([], help="Suite knob KEY=VALUE (repeatable; see docs/domains.md)."),
    overwrite: bool = typer.Option(False, help="Empty a non-empty output directory first."),
) -> None:
    """Write a generated suite as ordinary task directories (all or nothing)."""
    from posttrain.commands.checks import writable_dir
    from posttrain.tasks.suites import generate as generate_suite
    from posttrain.tasks.suites import suite_module
    from posttrain.tasks.task import plain_name

    plain_name(split, "--split")      # a split is part of each task id: never a path
    suite_module(suite)               # an unknown suite is an error before anything is made
    _empty_or_overwrite(out, overwrite)
    writable_dir(out, "the output directory")
    tasks = generate_suite(suite, out, n, seed=seed, split=split, knobs=knob)
    Console().print(f"wrote {len(tasks)} tasks to {out}")


def _empty_or_overwrite(out: Path, overwrite: bool) -> None:
    """Refuse to mix a new suite or seed with tasks already in out, unless asked to replace them."""
    import shutil

    from posttrain.errors import PosttrainError

    entries = [p for p in out.iterdir() if not p.name.startswith(".")] if out.is_dir() else []
    if entries and not overwrite:
        raise PosttrainError(f"{out} is not empty ({len(entries)} entries): use a new directory, "
                             "or --overwrite to replace its contents")
    for p in entries:
        shutil.rmtree(p) if p.is_dir() else p.unlink()


@tasks_app.command("oracle")
def oracle(
    path: Path = typer.Argument(..., help="A task directory, or a directory of them."),
    backend: str = typer.Option("bwrap", help="Sandbox backend (bwrap, or process to debug)."),
) -> None:
    """Run each task's solution/solve.sh in a sandbox, then its tests; print the rewards (a
    single-turn task's oracle reply is scored on the host). Every task of a directory is run;
    a broken one is a row, and the exit is 1 if any failed."""
    from posttrain.tasks import read_task
    from posttrain.validate.runner import task_dirs

    dirs = task_dirs(path)
    if dirs == [path]:
        read_task(path)                  # one task that cannot be read: one error line, exit 2
    table = Table("task", "oracle exit", "reward", "status", "error")
    failed = []
    for d in dirs:
        row = _oracle_row(d, backend, read_task)
        table.add_row(*row)
        failed += [] if row[3] == "ok" and row[2] == "1" else [row[0]]
    _wide_console().print(table)
    if failed:
        Console(stderr=True).print(f"{len(failed)} of {len(dirs)} oracles failed: {', '.join(failed)}",
                                   markup=False, highlight=False)
        raise typer.Exit(1)


def _oracle_row(task_dir: Path, backend: str, read_task) -> tuple[str, ...]:
    """(id, oracle exit, reward, status, error) of one task; a task that cannot run is an error row."""
    from posttrain.agent.trial import open_task_sandbox, run_oracle, verify
    from posttrain.errors import PosttrainError

    try:
        task = read_task(task_dir)
        if task.single_turn:
            return _reply_row(task)
        with open_task_sandbox(task, backend) as sandbox:
            result = run_oracle(task, sandbox)
            verdict = verify(task, sandbox)
    except PosttrainError as e:
        return (task_dir.name, "", "", "error", str(e))
    return (task.id, str(result.exit_code), f"{verdict.reward:g}", verdict.status, verdict.error)


def _reply_row(task) -> tuple[str, ...]:
    """A single-turn task's row: its oracle reply scored on the host (no sandbox, no exit code)."""
    from posttrain.tasks.suites import score_reply

    reward, _ = score_reply(task.config.metadata, task.oracle_reply())
    return (task.id, "", f"{reward:g}", "ok", "")


def _wide_console() -> Console:
    """A console for tables: the terminal's width, or unlimited in a pipe (ids never cut);
    cells are printed as written (an error's '[x]' is not taken for markup)."""
    console = Console(markup=False)
    return console if console.is_terminal else Console(width=100_000, markup=False)


SCAFFOLD = {
    "instruction.md": "Create the file /app/hello.txt containing exactly: Hello, world!\n",
    "environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\n",
    "solution/solve.sh": "#!/bin/bash\nset -e\nprintf 'Hello, world!\\n' > /app/hello.txt\n",
    "tests/test.sh": ("#!/bin/bash\n# Write a reward on every path; the exit code is ignored.\n"
                      "mkdir -p /logs/verifier\n"
                      'if [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, world!" ]; then\n'
                      "  echo 1 > /logs/verifier/reward.txt\nelse\n"
                      "  echo 0 > /logs/verifier/reward.txt\nfi\n"),
}


@tasks_app.command("new")
def new(
    name: str = typer.Argument(..., help="Task id (the directory name)."),
    root: Path = typer.Option(Path("."), "--dir", help="Where to create the task directory."),
) -> None:
    """Scaffold a working Harbor task (hello world) to edit; `posttrain validate` passes it."""
    from posttrain.errors import PosttrainError
    from posttrain.tasks import Task, TaskConfig, write_task
    from posttrain.tasks.task import plain_name

    plain_name(name, "task name")
    if root.exists() and not root.is_dir():
        raise PosttrainError(f"--dir {root} is a file; a directory is expected")
    if (root / name).exists():
        raise PosttrainError(f"{root / name}: already exists")
    config = TaskConfig.model_validate({
        "task": {"name": f"local/{name}", "description": "Edit me."},
        "metadata": {"difficulty": "easy", "category": "example"},
        "agent": {"timeout_sec": 120.0}, "verifier": {"timeout_sec": 60.0}})
    files = dict(SCAFFOLD)
    path = write_task(Task(name, files.pop("instruction.md"), config, Path(), files), root)
    Console().print(f"created {path}: instruction.md, task.toml, environment/, solution/, tests/")


def _list_row(path: Path, statuses: dict[str, str], labels: dict[str, str]) -> tuple[str, ...]:
    from posttrain.errors import PosttrainError
    from posttrain.tasks import read_task

    try:
        t = read_task(path)
    except PosttrainError as e:
        return (path.name, "", "", "", "", f"broken: {str(e).replace(f'{path}/', '').replace(str(path), '').strip(': ')}")
    c = t.config
    difficulty = labels.get(t.id, str(c.metadata.get("difficulty", "")))
    return (t.id, t.domain, difficulty, f"{c.agent.timeout_sec:g}s",
            f"{c.verifier.timeout_sec:g}s", statuses.get(t.id, "not validated"))


@tasks_app.command("list")
def list_tasks(
    path: Path = typer.Argument(..., help="A directory of task directories."),
    manifest: Optional[Path] = typer.Option(None, help="Validation manifest for the status column."),
) -> None:
    """A table of tasks: id, domain, difficulty, timeouts, status (unreadable tasks as broken)."""
    from posttrain.validate import load_manifest
    from posttrain.validate.runner import task_dirs

    statuses = load_manifest(manifest) if manifest else {}
    labels = _difficulty_labels(manifest) if manifest else {}
    table = Table("id", "domain", "difficulty", "agent timeout", "verifier timeout", "status")
    dirs = task_dirs(path)
    for d in dirs:
        table.add_row(*_list_row(d, statuses, labels))
    _wide_console().print(table)
    Console().print(f"{len(dirs)} tasks")


def _difficulty_labels(manifest: Path) -> dict[str, str]:
    """task id -> the manifest's calibrated difficulty label (tasks without one left out)."""
    import json

    tasks = json.loads(manifest.read_text(encoding="utf-8"))["tasks"]
    return {t["id"]: t["difficulty"]["label"] for t in tasks
            if isinstance(t.get("difficulty"), dict) and t["difficulty"].get("label")}


@tasks_app.command("import-tb1")
def import_tb1(
    src: Path = typer.Argument(..., help="A Terminal-Bench 1 task dir, or a dir of them."),
    out: Path = typer.Argument(..., help="Directory to write the Harbor task directories into."),
) -> None:
    """Convert Terminal-Bench 1 tasks (task.yaml, solution.sh, run-tests.sh) to Harbor tasks."""
    from posttrain.tasks.tb1.importer import import_tb1 as convert

    paths = convert(src, out)
    Console().print(f"imported {len(paths)} tasks into {out}")


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")
