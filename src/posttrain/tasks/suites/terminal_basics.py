"""The built-in `terminal-basics` suite, generated as ordinary Harbor task directories.

Multi-turn families (the answer depends on what an earlier command printed):
find-word, count-lines, config-value. Single-step families: create-file,
make-dir, copy-file. Each task has solution/solve.sh (the Harbor oracle),
solution/steps.json (the oracle as agent turns) and tests/test.sh, which writes
/logs/verifier/reward.txt on every path. The same seed gives the same suite.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path

from posttrain.errors import PosttrainError
from posttrain.tasks.config import TaskConfig
from posttrain.tasks.task import Task, write_task

SUITE = "terminal-basics"
WORDS = ("apple river stone cloud maple tiger lemon piano rocket candle violet "
         "forest ocean pepper silver garden mirror thunder falcon cactus harbor "
         "meadow copper orbit planet winter summer bridge castle dragon").split()
STEMS = "notes report draft memo todo ideas list plan log data".split()
KEYS = "host port user mode level color region owner".split()
DOCKERFILE = "FROM ubuntu:24.04\nWORKDIR /app\n"


@dataclass
class Spec:
    family: str
    instruction: str
    app_files: dict[str, str]
    steps: list[str]
    solve: str
    expected_check: str  # a bash condition that is true iff the task is solved
    multi_turn: bool


def _find_word(rng: random.Random) -> Spec:
    names = rng.sample(STEMS, rng.randint(3, 5))
    target, *fillers = rng.sample(WORDS, 8)
    holder = rng.choice(names)
    files = {}
    for n in names:
        words = rng.sample(fillers, 3) + ([target] if n == holder else [])
        rng.shuffle(words)
        files[f"data/{n}.txt"] = "\n".join(words) + "\n"
    return Spec(
        "find-word",
        f"Find the file in /app/data that contains the word {target}. "
        f"Write its path to /app/answer.txt.",
        files,
        # The second command copies the path exactly as grep printed it.
        [f"grep -l {target} /app/data/*", f"echo /app/data/{holder}.txt > /app/answer.txt"],
        f'basename "$(grep -l {target} /app/data/*)" > /app/answer.txt',
        f'[ "$(basename "$(tr -d "[:space:]" < /app/answer.txt)")" = "{holder}.txt" ]',
        True,
    )


def _count_lines(rng: random.Random) -> Spec:
    name = f"{rng.choice(STEMS)}.txt"
    n = rng.randint(2, 30)
    body = "".join(f"{rng.choice(WORDS)}\n" for _ in range(n))
    return Spec(
        "count-lines",
        f"Count the lines in /app/{name} and write the number to /app/answer.txt.",
        {name: body},
        [f"wc -l < /app/{name}", f"echo {n} > /app/answer.txt"],
        f"wc -l < /app/{name} > /app/answer.txt",
        f'[ "$(tr -d "[:space:]" < /app/answer.txt)" = "{n}" ]',
        True,
    )


def _config_value(rng: random.Random) -> Spec:
    keys = rng.sample(KEYS, rng.randint(3, 5))
    values = {k: rng.choice(WORDS) + str(rng.randint(1, 99)) for k in keys}
    key = rng.choice(keys)
    body = "".join(f"{k} = {v}\n" for k, v in values.items())
    return Spec(
        "config-value",
        f"Copy the value of {key} in /app/config.ini to /app/answer.txt.",
        {"config.ini": body},
        [f"grep {key} /app/config.ini", f"echo {values[key]} > /app/answer.txt"],
        f"grep '^{key} =' /app/config.ini | cut -d= -f2 | tr -d ' ' > /app/answer.txt",
        f'[ "$(tr -d "[:space:]" < /app/answer.txt)" = "{values[key]}" ]',
        True,
    )


def _create_file(rng: random.Random) -> Spec:
    name, text = f"{rng.choice(STEMS)}.txt", rng.choice(WORDS)
    return Spec(
        "create-file",
        f"Create the file /app/{name} containing the text {text}.",
        {},
        [f"echo {text} > /app/{name}"],
        f"echo {text} > /app/{name}",
        f'[ "$(tr -d "[:space:]" < /app/{name})" = "{text}" ]',
        False,
    )


def _make_dir(rng: random.Random) -> Spec:
    name = rng.choice(WORDS)
    return Spec("make-dir", f"Create the directory /app/{name}.", {},
                [f"mkdir -p /app/{name}"], f"mkdir -p /app/{name}", f"[ -d /app/{name} ]", False)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _copy_file(rng: random.Random) -> Spec:
    src, dst = rng.sample(STEMS, 2)
    body = "\n".join(rng.sample(WORDS, 3)) + "\n"
    return Spec(
        "copy-file",
        f"Copy /app/{src}.txt to /app/{dst}.txt.",
        {f"{src}.txt": body},
        [f"cp /app/{src}.txt /app/{dst}.txt"],
        f"cp /app/{src}.txt /app/{dst}.txt",
        # Compare with the known content, not the source, which the agent could rewrite.
        f'[ "$(sha256sum < /app/{dst}.txt)" = "{_sha256(body)}  -" ]',
        False,
    )


FAMILIES = {f.__name__.strip("_").replace("_", "-"): f for f in
            (_find_word, _count_lines, _config_value, _create_file, _make_dir, _copy_file)}


def _test_sh(check: str) -> str:
    # The reward is written on every path; the exit code is ignored (Harbor contract).
    return ("#!/bin/bash\nmkdir -p /logs/verifier\n"
            f"if {check} 2>/dev/null; then echo 1 > /logs/verifier/reward.txt\n"
            "else echo 0 > /logs/verifier/reward.txt; fi\n")


def make_task(task_id: str, spec: Spec) -> Task:
    config = TaskConfig.model_validate({
        "task": {"name": f"posttrain/{task_id}", "description": spec.instruction},
        "metadata": {"domain": SUITE, "family": spec.family, "multi_turn": spec.multi_turn,
                     "difficulty": "medium" if spec.multi_turn else "easy"},
        "agent": {"timeout_sec": 60.0},
        "verifier": {"timeout_sec": 30.0},
        "environment": {"cpus": 1, "memory_mb": 512, "network_mode": "no-network"},
    })
    copy = "COPY app/ /app/\n" if spec.app_files else ""
    files = {"environment/Dockerfile": DOCKERFILE + copy,
             "solution/solve.sh": f"#!/bin/bash\nset -e\ncd /app\n{spec.solve}\n",
             "solution/steps.json": json.dumps(spec.steps, indent=1) + "\n",
             "tests/test.sh": _test_sh(spec.expected_check)}
    files |= {f"environment/app/{rel}": body for rel, body in spec.app_files.items()}
    return Task(id=task_id, instruction=spec.instruction + "\n", config=config,
                path=Path(), files=files)


def generate(out_dir: str | Path, n_tasks: int, seed: int, split: str = "train",
             families: list[str] | None = None, knobs: dict[str, str] | None = None) -> list[Task]:
    """Write n_tasks tasks under out_dir, cycling through the families; returns them.
    The one knob is `families` (comma-separated)."""
    knobs = dict(knobs or {})
    if set(knobs) - {"families"}:
        raise PosttrainError(f"suite {SUITE}: unknown knobs {sorted(set(knobs) - {'families'})}; "
                             "known: ['families']")
    if "families" in knobs:
        families = [f.strip() for f in knobs["families"].split(",") if f.strip()]
    names = families or list(FAMILIES)
    unknown = set(names) - set(FAMILIES)
    if unknown:
        raise PosttrainError(f"suite {SUITE}: unknown families {sorted(unknown)}; "
                             f"known: {sorted(FAMILIES)}")
    rng = random.Random(f"{SUITE}/{split}/{seed}")
    tasks = []
    for i in range(n_tasks):
        family = names[i % len(names)]
        task = make_task(f"{split}-{i:04d}-{family}", FAMILIES[family](rng))
        write_task(task, out_dir)
        tasks.append(task)
    return tasks
