"""The tasks an eval job runs: every readable task of --tasks (a broken one is skipped with a
warning naming it, as `rl`, `validate` and `tasks list` do), less those a validation manifest
does not mark usable (`--manifest`, docs/validate.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from posttrain.errors import TaskError
from posttrain.tasks import Task
from posttrain.tasks.manifest import load_manifest, usable_tasks
from posttrain.tasks.task import read_task

Warn = Callable[[str], None]


def warn_stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def read_tasks(tasks_dir: str, manifest: str | None = None, warn: Warn = warn_stderr) -> list[Task]:
    """The job's tasks, sorted by id; an error when none is left to run."""
    p = Path(tasks_dir)
    if p.is_dir() and not any(p.iterdir()):
        raise TaskError(f"{p}: the task directory is empty")
    tasks = _readable(p, warn)
    if single := [t.id for t in tasks if t.single_turn]:
        raise TaskError(f"{p}: {len(single)} single-turn tasks (e.g. {single[0]}): `posttrain eval` "
                        "runs sandbox episodes; score replies with rollout.single_turn.reply_score")
    return _usable(tasks, manifest, warn) if manifest else tasks


def _readable(root: Path, warn: Warn) -> list[Task]:
    """root itself when it is one task (unreadable: an error), else each readable task under it."""
    if (root / "task.toml").is_file():
        return [read_task(root)]
    if not root.is_dir():
        raise TaskError(f"{root}: no such task directory")
    tasks, broken = [], 0
    for d in sorted(x for x in root.iterdir() if (x / "task.toml").is_file()):
        try:
            tasks.append(read_task(d))
        except TaskError as e:
            broken += 1
            warn(f"skipped broken task {d.name}: {str(e).replace(f'{d}/', '').replace(str(d), '').strip(': ')}")
    if not tasks:
        what = f"all {broken} tasks are broken" if broken else "contains no task directories (no */task.toml)"
        raise TaskError(f"{root}: {what}")
    return tasks


def _usable(tasks: list[Task], manifest: str, warn: Warn) -> list[Task]:
    """The tasks the manifest marks usable ("ok"); one warning counts those left out by status."""
    statuses = load_manifest(manifest)
    kept = usable_tasks(tasks, statuses)
    left = [t.id for t in tasks if t not in kept]
    if left:
        by = {}
        for tid in left:
            by.setdefault(statuses.get(tid, "not in the manifest"), []).append(tid)
        parts = "; ".join(f"{s}: {', '.join(ids)}" for s, ids in sorted(by.items()))
        warn(f"left out {len(left)} of {len(tasks)} tasks by {manifest} ({parts})")
    if not kept:
        raise TaskError(f"no task of the set is marked ok in {manifest}")
    return kept
