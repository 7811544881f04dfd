"""The `code` suite: bug fixes and write-from-scratch tasks in a real package from PyPI.

bugfix: one to three token mutations (comparison, arithmetic, constant, boolean) in
distinct functions of the host; the agent gets the bugged tree as a git repository at
/app/repo with an issue text and without the tests the bug breaks. Reward 1 only if
every fail-to-pass and pass-to-pass test passes and the hidden differential cases
match the original function. scratch: one or two functions stubbed out; reward = share
of their hidden tests that pass. Knobs (task metadata): family, mutation count, kind,
issue detail (pinpoint, symptom, vague) and distance (the failing tests call the
mutated function directly, or only through another one). Same seed, same tasks.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

from posttrain.errors import PosttrainError
from posttrain.tasks.suites import place
from posttrain.tasks.suites.code import host as code_host
from posttrain.tasks.suites.code import mutate as code_mutate
from posttrain.tasks.suites.code import pypi
from posttrain.tasks.suites.code import write as code_write
from posttrain.tasks.suites.code.pick import near_misses, pick

SUITE = "code"
FAMILIES = ("bugfix", "scratch")
DETAILS = ("pinpoint", "symptom", "vague")
KNOBS = {"families": "bugfix,scratch", "max_mutations": "3", "details": ",".join(DETAILS),
         "kinds": ",".join(code_mutate.KINDS), "host": "toolz"}


def parse_knobs(knobs: dict[str, str] | None) -> dict:
    """Checked knob values; an unknown knob or a value out of range is a PosttrainError."""
    raw = dict(KNOBS) | {k: str(v) for k, v in (knobs or {}).items()}
    unknown = set(raw) - set(KNOBS)
    if unknown:
        raise PosttrainError(f"suite code: unknown knobs {sorted(unknown)}; known: {sorted(KNOBS)}")

    def items(name: str, allowed) -> list[str]:
        got = [x.strip() for x in raw[name].split(",") if x.strip()]
        bad = [x for x in got if x not in allowed]
        if bad or not got:
            raise PosttrainError(f"suite code: {name}={raw[name]!r}: choose from {list(allowed)}")
        return got

    try:
        max_mut = int(raw["max_mutations"])
    except ValueError:
        max_mut = 0
    if not 1 <= max_mut <= 3:
        raise PosttrainError(f"suite code: max_mutations={raw['max_mutations']!r} is out of "
                             "range (1 to 3)")
    if raw["host"] not in pypi.HOSTS:
        raise PosttrainError(f"suite code: host {raw['host']!r}; known: {sorted(pypi.HOSTS)}")
    return {"families": items("families", FAMILIES), "details": items("details", DETAILS),
            "kinds": items("kinds", code_mutate.KINDS), "max_mutations": max_mut,
            "host": pypi.HOSTS[raw["host"]]}


def generate(out_dir: str | Path, n_tasks: int, seed: int, split: str = "train",
             knobs: dict[str, str] | None = None, cache: Path | None = None) -> list:
    """Write n_tasks code tasks under out_dir; nothing is written if the host cannot be
    fetched, and a failure midway leaves no partial task directory."""
    opts = parse_knobs(knobs)
    prep = code_host.prepare(opts["host"], cache)          # may raise before any write
    out = Path(out_dir)
    staging = out / f".staging-{SUITE}-{split}-{seed}"
    rng = random.Random(f"{SUITE}/{split}/{seed}")
    tasks, seen = [], set()
    try:
        out.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
        for i in range(n_tasks):
            family = opts["families"][i % len(opts["families"])]
            top = opts["max_mutations"] if family == "bugfix" else min(2, opts["max_mutations"])
            count = rng.choice([c for c in (1, 1, 2, 3) if c <= top])
            detail = rng.choice(opts["details"])
            bug = pick(prep, rng, family, count, opts["kinds"], seen) or \
                pick(prep, rng, family, 1, opts["kinds"], seen, attempts=60)
            if bug is None:
                raise PosttrainError(f"suite code: no usable {family} mutation found for task "
                                     f"{i} (try other kinds or fewer mutations)")
            task_id = f"{split}-{i:04d}-{family}"
            misses = near_misses(prep, bug, rng)
            tasks.append(code_write.write(prep, bug, task_id, detail, staging, misses))
        place(tasks, staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        prep.cleanup()
    return tasks
