"""Generated suites by name: one row per suite, each a module with SUITE, Knobs and build().

A suite module exposes `SUITE` (its name) and either `Knobs` (a pydantic model of its
difficulty knobs, ranges enforced) with `build(n, seed, split, knobs) -> list[Task]` (tasks
in memory, not written), or `generate(out_dir, n, seed, split, knobs)` that writes its own
task directories and checks its own knobs (a dict of KEY -> VALUE strings). `generate` here
writes them all or nothing: into a temporary folder inside OUT first, moved into place only
when every task was built.
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
from pathlib import Path

from pydantic import ValidationError

from posttrain.errors import PosttrainError

SUITES = {  # name -> module; one line per suite
    "terminal-basics": "posttrain.tasks.suites.terminal_basics",
    "finance": "posttrain.tasks.suites.finance.suite",
    "longctx": "posttrain.tasks.suites.longctx.suite",
    "cad": "posttrain.tasks.suites.cad.suite",
    "terminal-tools": "posttrain.tasks.suites.terminal_tools",
    "code": "posttrain.tasks.suites.code",
}


EXTRAS = {"cad": "cad"}  # suite -> the pyproject extra its generation needs


def suite_module(name: str):
    if name not in SUITES:
        raise PosttrainError(f"unknown suite {name!r}; known: {', '.join(sorted(SUITES))}")
    try:
        return importlib.import_module(SUITES[name])
    except ModuleNotFoundError as e:
        if name not in EXTRAS or (e.name or "").startswith("posttrain"):
            raise
        raise PosttrainError(f"suite {name} needs the {EXTRAS[name]} extra ({e.name} is not installed): "
                             f"pip install -c constraints.txt -e '.[{EXTRAS[name]}]'") from None


def parse_knobs(module, pairs: list[str]):
    """KEY=VALUE strings to the suite's Knobs model; a clear error for unknown or bad ones."""
    raw = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise PosttrainError(f"knob {pair!r}: write KEY=VALUE")
        raw[key.strip().replace("-", "_")] = value.strip()
    knobs_model = getattr(module, "Knobs", None)
    if knobs_model is None:          # the suite's own generate() checks them
        return raw
    try:
        return knobs_model.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise PosttrainError(f"knob {where}: {first['msg']} (got {first.get('input')!r}); "
                             f"knobs of {module.SUITE}: {', '.join(knobs_model.model_fields)}") from None


def generate(name: str, out: str | Path, n: int, seed: int, split: str = "train",
             knobs: list[str] | None = None) -> list:
    """Build and write suite `name` into out; nothing is left in out if any task fails."""
    from posttrain.tasks.task import write_task

    module = suite_module(name)
    parsed = parse_knobs(module, knobs or [])
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".generating-", dir=out))
    try:
        if hasattr(module, "build"):
            tasks = module.build(n, seed, split, parsed)
            for task in tasks:
                write_task(task, tmp)
        else:                       # the suite writes its own task directories
            tasks = module.generate(tmp, n, seed=seed, split=split, knobs=parsed)
        for task in tasks:
            dest = out / task.id
            if dest.exists():
                shutil.rmtree(dest)
            (tmp / task.id).rename(dest)
            task.path = dest
        return tasks
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
