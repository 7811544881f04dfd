"""Generated suites by name: one row per suite (generator, hack probes, extra), a folder or file each.

A suite module exposes `SUITE` (its name) and either `Knobs` (a pydantic model of its
difficulty knobs, ranges enforced) with `build(n, seed, split, knobs) -> list[Task]` (tasks
in memory, not written), or `generate(out_dir, n, seed, split, knobs)` that writes its own
task directories and checks its own knobs (a dict of KEY -> VALUE strings). `generate` here
writes them all or nothing: into a temporary folder inside OUT first, moved into place only
when every task was built.

A single-turn suite (its tasks answered by one reply, metadata.kind = "single-turn") names a
scorer module: `score_reply(metadata, reply) -> (reward, details)`, run on the host. A task's
domain is its suite's name, or the name and a part of its own (`reasoning-gym/chain_sum`).
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
from pathlib import Path
from typing import NamedTuple

from pydantic import ValidationError

from posttrain.errors import PosttrainError


class Suite(NamedTuple):
    """One generated suite: where its generator lives, its hack probes, the extra it needs."""

    module: str               # SUITE, Knobs and build(), or generate()
    probes: str | None = None  # a module with PROBES: {name: function(task) -> bash script}
    extra: str | None = None   # the pyproject extra its generation needs
    scorer: str | None = None  # single-turn suites: a module with score_reply(metadata, reply)


SUITES = {  # name (= a task's metadata.domain, or its part before "/") -> its row; one line per suite
    "terminal-basics": Suite("posttrain.tasks.suites.terminal_basics"),
    "finance": Suite("posttrain.tasks.suites.finance.suite", "posttrain.tasks.suites.finance.probes"),
    "longctx": Suite("posttrain.tasks.suites.longctx.suite", "posttrain.tasks.suites.longctx.probes"),
    "cad": Suite("posttrain.tasks.suites.cad.suite", "posttrain.tasks.suites.cad.probes", extra="cad"),
    "terminal-tools": Suite("posttrain.tasks.suites.terminal_tools.suite",
                            "posttrain.tasks.suites.terminal_tools.probes"),
    "code": Suite("posttrain.tasks.suites.code.suite"),
    "tool-use": Suite("posttrain.tasks.suites.tool_use.suite", "posttrain.tasks.suites.tool_use.probes"),
    "instruct": Suite("posttrain.tasks.suites.instruct.suite", "posttrain.tasks.suites.instruct.probes",
                      extra="instruct", scorer="posttrain.tasks.suites.instruct.score"),
    "reasoning-gym": Suite("posttrain.tasks.suites.rgym.suite", "posttrain.tasks.suites.rgym.probes",
                           extra="reasoning-gym", scorer="posttrain.tasks.suites.rgym.score"),
}


def suite_module(name: str):
    if name not in SUITES:
        raise PosttrainError(f"unknown suite {name!r}; known: {', '.join(sorted(SUITES))}")
    return _import(name, SUITES[name].module)


def _import(name: str, module: str):
    """A suite's module; a clear error when the extra it needs is not installed."""
    row = SUITES[name]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if row.extra is None or (e.name or "").startswith("posttrain"):
            raise
        raise PosttrainError(f"suite {name} needs the {row.extra} extra ({e.name} is not installed): "
                             f"pip install -c constraints.txt -e '.[{row.extra}]'") from None


def score_reply(metadata: dict, reply: str) -> tuple[float, dict[str, float]]:
    """(reward, details) of a single-turn task's reply, by its domain's scorer."""
    domain = str(metadata.get("domain", ""))
    suite = domain.split("/")[0]
    row = SUITES.get(suite)
    if row is None or row.scorer is None:
        raise PosttrainError(f"domain {domain!r} has no reply scorer (single-turn suites: "
                             f"{', '.join(n for n, r in SUITES.items() if r.scorer)})")
    return _import(suite, row.scorer).score_reply(metadata, reply)


def probes_module(domain: str):
    """The module holding a domain's hack probes (and scripted partial agents), or None."""
    suite = domain.split("/")[0]
    row = SUITES.get(suite)
    return _import(suite, row.probes) if row and row.probes else None


def probes_for(task) -> dict:
    """The hack probes of a task's domain, run beside the generic ones by `posttrain validate`:
    like them, none may raise the reward above the no-op agent's (none for a domain without probes)."""
    module = probes_module(task.domain)
    return dict(module.PROBES) if module else {}


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
    from posttrain.tasks.task import plain_name, write_task

    plain_name(split, "split")
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
        place(tasks, tmp, out)
        return tasks
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def place(tasks: list, staging: Path, out: Path) -> None:
    """Move each task's directory from staging into out, replacing one of the same id."""
    from posttrain.tasks.task import plain_name

    for task in tasks:
        dest = out / plain_name(task.id, "task id")
        if dest.exists():
            shutil.rmtree(dest)
        (staging / task.id).rename(dest)
        task.path = dest
