"""Validate a directory of tasks: static checks, then the dynamic checks in order, per task,
N tasks at a time. Every finished check is saved, so a rerun skips it (resume).

A broken task never stops the run: a malformed directory, an unbuildable environment
or a probe that crashes becomes that task's failed check with the reason.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Callable, Iterator

from posttrain.errors import PosttrainError
from posttrain.validate.checks import DYNAMIC
from posttrain.validate.config import ValidateConfig
from posttrain.validate.replies import CHECKS as REPLY_CHECKS
from posttrain.validate.record import Check, TaskReport, skipped, task_status
from posttrain.validate.state import CheckStore, fingerprint
from posttrain.validate.static import leak_check, load_task

MARKERS = ("task.toml", "instruction.md", "tests", "solution", "environment", "task.yaml")
NEEDS = {"instruction_files": ("nop",), "determinism": ("oracle", "nop"), "hacks": ("nop",),
         "trivial": ("nop",), "mutation": ("oracle",)}
NOT_A_VERDICT = ("mutation",)   # its harness failing says nothing about the task
OnCheck = Callable[[str, str, bool], None]   # (task id, check name, reused from a saved run)


def task_dirs(root: Path) -> list[Path]:
    """root itself if it is a task, else its subdirectories that look like tasks."""
    root = Path(root)
    if (root / "task.toml").exists() or (root / "task.yaml").exists():
        return [root]
    if not root.is_dir():
        raise PosttrainError(f"{root}: no such task directory")
    dirs = [p for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith(".")
            and any((p / m).exists() or (p / m).is_symlink() for m in MARKERS)]
    if not dirs:
        raise PosttrainError(f"{root}: contains no task directories")
    return dirs


def _blocked(name: str, checks: dict[str, Check]) -> str | None:
    oracle = checks.get("oracle")
    if name != "oracle" and oracle is not None and oracle.passed is False and oracle.flags == "broken":
        return "the oracle never passes"
    for need in NEEDS.get(name, ()):
        if need not in checks or not checks[need].evidence:
            return f"needs the {need} check, which did not run"
    return None


def checks_for(task) -> dict:
    """The dynamic checks of a task: replies scored on the host for a single-turn task, else
    sandbox runs."""
    return REPLY_CHECKS if task.single_turn else DYNAMIC


def _crashed(name: str, e: Exception) -> tuple[Check, bool]:
    """(the check, whether to save it) for a check that raised. The task's own fault (a
    PosttrainError, e.g. an unsupported Dockerfile) makes it broken; anything else is
    infrastructure, reported and retried on resume. A step in NOT_A_VERDICT never judges
    the task by its own failure: the error is reported and the other checks stand."""
    why = f"{type(e).__name__}: {e}"
    if name in NOT_A_VERDICT:
        return Check(name, None, reason=f"not judged: the {name} step failed ({why})",
                     evidence={"errors": [why]}), False
    if isinstance(e, PosttrainError):
        ev = {"build_log_tail": e.log_tail} if getattr(e, "log_tail", None) else {}
        return Check(name, False, "broken", str(e), ev), True
    return Check(name, False, "broken", f"infra error: {why}"), False


def _run_one(name: str, task, cfg: ValidateConfig, checks: dict[str, Check]) -> tuple[Check, bool]:
    """(the check, whether to save it): crashes are reported but retried on resume."""
    t0 = time.perf_counter()
    try:
        check, keep = checks_for(task)[name](task, cfg, checks), True
    except Exception as e:
        check, keep = _crashed(name, e)
    check.seconds = round(time.perf_counter() - t0, 3)
    return check, keep


def validate_task(path: Path, cfg: ValidateConfig, store: CheckStore,
                  on_check: OnCheck | None = None) -> TaskReport:
    path = Path(path)
    task, static = load_task(path, cfg)
    checks = {"static": static}
    if task is None:
        return TaskReport(path.name, str(path), "broken", [f"static: {static.reason}"], checks)
    fp = fingerprint(path)
    entry = store.load(task.id, fp)
    checks["leaks"] = leak_check(task)
    for name in checks_for(task):
        if name in entry["checks"]:
            checks[name] = entry["checks"][name]
            if on_check:
                on_check(task.id, name, True)
            continue
        why = _blocked(name, checks)
        check, keep = (skipped(name, why), True) if why else _run_one(name, task, cfg, checks)
        checks[name] = check
        if keep:
            entry["checks"][name] = check
            store.save(task.id, fp, entry)
        if on_check:
            on_check(task.id, name, False)
    status, reasons = task_status(checks)
    meta = {k: task.config.metadata.get(k) for k in ("domain", "category", "difficulty")
            if task.config.metadata.get(k) is not None}
    return TaskReport(task.id, str(path), status, reasons, checks, metadata=meta)


def _safe(path: Path, cfg: ValidateConfig, store: CheckStore, on_check) -> TaskReport:
    try:
        return validate_task(path, cfg, store, on_check)
    except Exception as e:   # never let one task stop the run
        reason = f"could not be validated: {type(e).__name__}: {e}"
        return TaskReport(path.name, str(path), "broken", [reason],
                          {"static": Check("static", False, "broken", reason)})


def validate_dirs(paths: list[Path], cfg: ValidateConfig, state_dir: Path, jobs: int = 1,
                  on_check: OnCheck | None = None) -> Iterator[TaskReport]:
    """Reports as tasks finish (not in input order)."""
    store = CheckStore(state_dir, cfg.digest())
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        futures = [pool.submit(_safe, p, cfg, store, on_check) for p in paths]
        try:
            for f in as_completed(futures):
                yield f.result()
        finally:      # interrupted: drop queued tasks; running ones finish their check
            for f in futures:
                f.cancel()
