"""The `tool-use` suite: multi-turn tasks an agent solves only through declared, stateful tools.

Five families (kv, calc, files, inventory, calendar), each a few templates ("combos") that need
2 to 6 calls; the values to write come from tool outputs. Each task ships tools.json, the tool
program (/app/.tools/run.py) and its own initial state (/app/.state/state.json). The goal is
found by playing the oracle's calls through the same program: one condition per item they
change. The verifier gives the share of conditions met, and 0 for a state with any other
change (check.py). Splits: "heldout-family" is the calendar family, "heldout-combo" the train
families' held-out combos, "heldout" both, any other split name (train) the rest. Same seed, same tasks.
"""

from __future__ import annotations

import ast
import copy
import functools
import json
import random
import shlex
from pathlib import Path

from posttrain.errors import PosttrainError
from posttrain.tasks.config import TaskConfig
from posttrain.tasks.suites.tool_use import (
    check,
    families,
    program,
    program_base,
    records,
    tools,
)
from posttrain.tasks.task import Task, write_task

SUITE = "tool-use"
DOCKERFILE = "FROM ubuntu:24.04\nWORKDIR /app\nCOPY app/ /app/\n"
FAMILIES = {"kv": families.KV, "calc": families.CALC, "files": records.FILES,
            "inventory": records.INVENTORY, "calendar": records.CALENDAR}
HELDOUT_FAMILIES = ("calendar",)
HELDOUT_COMBOS = {"kv": "swap", "calc": "two_results", "files": "find", "inventory": "trim"}
KNOBS = ("families", "calls", "distractors", "obs_pad")
FILLER = ("synced", "cached", "replica", "checked", "nominal", "indexed", "stable", "mirrored")
# Reward on every path, nothing else left in /logs/verifier; the checker runs by absolute path,
# isolated (-I -S): nothing in /app can stand in for python or its modules.
TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
find /logs/verifier -mindepth 1 -delete 2>/dev/null
/usr/bin/python3 -I -S /tests/check.py > /logs/verifier/check.log 2>&1
[ -s /logs/verifier/reward.json ] || echo 0 > /logs/verifier/reward.txt
"""


def split_families(split: str) -> dict[str, tuple[str, ...]]:
    """{family: its combos} a split draws from: "heldout-family" the held-out families (every
    combo), "heldout-combo" the others' held-out combos, "heldout" both, any other split the rest."""
    if split == "heldout-family":
        return {f: tuple(FAMILIES[f]) for f in HELDOUT_FAMILIES}
    train = [f for f in FAMILIES if f not in HELDOUT_FAMILIES]
    if split == "heldout-combo":
        return {f: (HELDOUT_COMBOS[f],) for f in train}
    if split == "heldout":
        return split_families("heldout-family") | split_families("heldout-combo")
    return {f: tuple(c for c in FAMILIES[f] if c != HELDOUT_COMBOS[f]) for f in train}


def level(calls: int) -> str:
    return "easy" if calls <= 2 else "medium" if calls <= 4 else "hard"


def _int_knob(knobs: dict, key: str, default: int, lo: int, hi: int) -> int:
    raw = str(knobs.get(key, default)).strip()
    if not raw.isdigit() or not lo <= int(raw) <= hi:
        raise PosttrainError(f"suite {SUITE}: knob {key}={raw!r}: a whole number from {lo} to {hi}")
    return int(raw)


def parse_knobs(knobs: dict[str, str] | None) -> dict:
    """The knobs checked: families (comma list), calls ("A-B" or "N", within 2-6),
    distractors (0-4), obs_pad (0-400)."""
    knobs = dict(knobs or {})
    if set(knobs) - set(KNOBS):
        raise PosttrainError(f"suite {SUITE}: unknown knobs {sorted(set(knobs) - set(KNOBS))}; "
                             f"known: {list(KNOBS)}")
    names = [f.strip() for f in str(knobs.get("families", ",".join(FAMILIES))).split(",") if f.strip()]
    if not names or set(names) - set(FAMILIES):
        raise PosttrainError(f"suite {SUITE}: unknown families {sorted(set(names) - set(FAMILIES))};"
                             f" known: {sorted(FAMILIES)}")
    lo, _, hi = str(knobs.get("calls", "2-6")).strip().partition("-")
    hi = hi or lo
    if not (lo.isdigit() and hi.isdigit() and 2 <= int(lo) <= int(hi) <= 6):
        raise PosttrainError(f"suite {SUITE}: knob calls={knobs['calls']!r}: write A-B or N, "
                             "with 2 <= A <= B <= 6")
    return {"families": list(dict.fromkeys(names)), "calls": (int(lo), int(hi)),
            "distractors": _int_knob(knobs, "distractors", 0, 0, 4),
            "obs_pad": _int_knob(knobs, "obs_pad", 0, 0, 400)}


def plan(split: str, k: dict) -> dict[str, list[tuple[str, int]]]:
    """{family: [(combo, calls), ...]} this split and these knobs allow; families with none
    are left out, and none left at all is an error."""
    lo, hi = k["calls"]
    allowed = split_families(split)
    options = {f: [(c, n) for c in allowed[f] for n in FAMILIES[f][c].calls if lo <= n <= hi]
               for f in k["families"] if f in allowed}
    options = {f: o for f, o in options.items() if o}
    if not options:
        raise PosttrainError(f"suite {SUITE}: split {split!r} has no task with {lo}-{hi} calls in "
                             f"families {k['families']} (it draws from {sorted(allowed)})")
    return options


def goal(draft: families.Draft) -> tuple[dict, list[dict]]:
    """(final state, conditions): the oracle's calls played through the tool program; one
    condition per item they change, in the order the calls first change them."""
    state, order = copy.deepcopy(draft.state), []
    first = check.flatten(state)
    for step in draft.steps:
        program.call(state, step["name"], step["arguments"])
        now = check.flatten(state)
        order += [i for i in sorted(set(first) | set(now)) if now.get(i) != first.get(i)
                  and i not in order]
    final = check.flatten(state)
    order = [i for i in order if final.get(i) != first.get(i)]
    deps = {}
    for item, before in draft.after:
        deps.setdefault(item, []).append(before)
    return state, [{"item": i, "value": final.get(i), "after": deps.get(i, [])} for i in order]


def _pad(rng: random.Random, n: int) -> str:
    words = []
    while len(" ".join(words)) < n:
        words.append(rng.choice(FILLER))
    return " ".join(words)[:n]


def calls_script(steps: list[dict]) -> str:
    """Bash lines making these calls through the tool program (arguments shell-quoted)."""
    return "".join(f"TOOL_ARGS={shlex.quote(json.dumps(s['arguments']))} {tools.COMMAND} "
                   f"{shlex.quote(s['name'])}\n" for s in steps)


@functools.cache
def shipped_program() -> str:
    """/app/.tools/run.py: program_base.py, then program.py without its import of it."""
    text = Path(program.__file__).read_text(encoding="utf-8")
    node = next(n for n in ast.parse(text).body
                if isinstance(n, ast.ImportFrom) and n.module == program_base.__name__)
    lines = text.splitlines(keepends=True)
    rest = "".join(lines[:node.lineno - 1] + lines[node.end_lineno:])
    return Path(program_base.__file__).read_text(encoding="utf-8") + "\n\n" + rest


def make_task(task_id: str, family: str, combo: str, draft: families.Draft, declared: list[str],
              pad: str) -> Task:
    _, conditions = goal(draft)
    n = len(draft.steps)
    config = TaskConfig.model_validate({
        "task": {"name": f"posttrain/{task_id}", "description": draft.instruction},
        "metadata": {"domain": SUITE, "family": family, "combo": f"{family}/{combo}", "calls": n,
                     "difficulty": level(n), "multi_turn": True, "tools": ",".join(declared),
                     "conditions": len(conditions)},
        "agent": {"timeout_sec": 300.0}, "verifier": {"timeout_sec": 60.0},
        "environment": {"cpus": 1, "memory_mb": 512, "network_mode": "no-network"}})
    files = {
        "tools.json": json.dumps(tools.declare(declared), indent=1) + "\n",
        "environment/Dockerfile": DOCKERFILE,
        "environment/app/.tools/run.py": shipped_program(),
        "environment/app/.tools/config.json": json.dumps({"tools": declared, "pad": pad}) + "\n",
        "environment/app/.state/state.json": json.dumps(draft.state, indent=1) + "\n",
        "solution/steps.json": json.dumps(draft.steps, indent=1) + "\n",
        "solution/solve.sh": "#!/bin/bash\nset -e\ncd /app\n" + calls_script(draft.steps),
        "tests/test.sh": TEST_SH,
        "tests/check.py": Path(check.__file__).read_text(encoding="utf-8"),
        "tests/goal.json": json.dumps({"initial": draft.state, "conditions": conditions,
                                       "derived": draft.derived}, indent=1) + "\n"}
    return Task(id=task_id, instruction=draft.instruction + "\n", config=config, path=Path(),
                files=files)


def draw(rng: random.Random, family: str, options: list[tuple[str, int]], k: dict):
    """One task of a family: (combo, draft, declared tool names, filler)."""
    n = rng.choice(sorted({c for _, c in options}))          # lengths evenly, then a combo
    combo = rng.choice([c for c, m in options if m == n])
    draft = FAMILIES[family][combo].draw(rng, n)
    own = tools.FAMILY_TOOLS[family]
    others = sorted(t for t in tools.TOOLS if t not in own)
    declared = sorted([*own, *rng.sample(others, k["distractors"])])
    return combo, draft, declared, _pad(rng, k["obs_pad"])


def generate(out_dir: str | Path, n_tasks: int, seed: int, split: str = "train",
             knobs: dict[str, str] | None = None) -> list[Task]:
    """Write n_tasks tasks under out_dir, cycling through the split's families."""
    k = parse_knobs(knobs)
    options = plan(split, k)
    rng = random.Random(f"{SUITE}/{split}/{seed}")
    tasks = []
    for i in range(n_tasks):
        family = list(options)[i % len(options)]
        combo, draft, declared, pad = draw(rng, family, options[family], k)
        task = make_task(f"{split}-{i:04d}-{family}", family, combo, draft, declared, pad)
        write_task(task, out_dir)
        tasks.append(task)
    return tasks
