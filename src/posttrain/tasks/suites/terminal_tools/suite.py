"""The `terminal-tools` suite: multi-step tasks with git, sqlite3, jq, make and gcc, openssl, tar.

Each family plants one obstacle the agent must notice and recover from: git refuses to
commit without an identity, the SQL dump uses a reserved word as a table name, the JSON
nests its items, the Makefile indents with spaces and forgets -lm, the cipher text is
base64 though nobody says so, the ".tar.gz" is really bzip2. Verifiers never trust what
the agent says it did: they read git objects with plumbing commands (repository config
that runs programs switched off), open the database read-only and in safe mode, rebuild
the C program from the agent's files and run it on an input only the tests hold, and
unpack archives into a fresh directory. Same seed, same tasks.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from posttrain.errors import PosttrainError
from posttrain.tasks.config import TaskConfig
from posttrain.tasks.suites.terminal_tools.families import FAMILIES, ToolSpec
from posttrain.tasks.task import Task, write_task

SUITE = "terminal-tools"
DOCKERFILE = "FROM ubuntu:24.04\nWORKDIR /app\nCOPY app/ /app/\n"


def test_sh(checks: list[str]) -> str:
    """Every check must pass; the reward is written last, on every path, and anything
    else in /logs/verifier (a reward.json planted by code the checks ran) is removed."""
    body = "".join(f"  {c} || exit 1\n" for c in checks)
    return ("#!/bin/bash\nmkdir -p /logs/verifier\n"
            f"if (\n{body}) > /logs/verifier/check.log 2>&1; then r=1; else r=0; fi\n"
            "rm -f /logs/verifier/reward.json\necho $r > /logs/verifier/reward.txt\n")


def level(steps: int) -> str:
    """Difficulty from the oracle's path, the obstacle and its recovery included: 3 steps
    (sqlite, jq, openssl) easy, 4 (make) medium, 5 or more (git, tar) hard."""
    return "easy" if steps <= 3 else "medium" if steps == 4 else "hard"


def make_task(task_id: str, spec: ToolSpec) -> tuple[Task, dict[str, bytes]]:
    config = TaskConfig.model_validate({
        "task": {"name": f"posttrain/{task_id}", "description": spec.instruction},
        "metadata": {"domain": SUITE, "family": spec.family, "multi_turn": True,
                     "difficulty": level(len(spec.steps)), "steps": len(spec.steps)},
        "agent": {"timeout_sec": 300.0}, "verifier": {"timeout_sec": 120.0},
        "environment": {"cpus": 1, "memory_mb": 1024, "network_mode": "no-network"}})
    files = {"environment/Dockerfile": DOCKERFILE,
             "solution/solve.sh": f"#!/bin/bash\nset -e\ncd /app\n{spec.solve}\n",
             "solution/steps.json": json.dumps(spec.steps, indent=1) + "\n",
             "tests/test.sh": test_sh(spec.checks)}
    files |= {f"tests/{k}": v for k, v in spec.hidden.items()}
    files |= {f"environment/app/{k}": v for k, v in spec.files.items() if isinstance(v, str)}
    binary = {f"environment/app/{k}": v for k, v in spec.files.items() if isinstance(v, bytes)}
    return Task(id=task_id, instruction=spec.instruction + "\n", config=config, path=Path(),
                files=files), binary


def generate(out_dir: str | Path, n_tasks: int, seed: int, split: str = "train",
             knobs: dict[str, str] | None = None) -> list[Task]:
    """Write n_tasks tasks under out_dir, cycling through the families (knob `families`)."""
    knobs = dict(knobs or {})
    if set(knobs) - {"families"}:
        raise PosttrainError(f"suite {SUITE}: unknown knobs {sorted(set(knobs) - {'families'})}; "
                             "known: ['families']")
    names = [f.strip() for f in knobs.get("families", ",".join(FAMILIES)).split(",") if f.strip()]
    unknown = sorted(set(names) - set(FAMILIES))
    if unknown or not names:
        raise PosttrainError(f"suite {SUITE}: unknown families {unknown}; known: {sorted(FAMILIES)}")
    rng = random.Random(f"{SUITE}/{split}/{seed}")
    tasks = []
    for i in range(n_tasks):
        family = names[i % len(names)]
        task, binary = make_task(f"{split}-{i:04d}-{family}", FAMILIES[family](rng))
        path = write_task(task, out_dir)
        for rel, data in binary.items():
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_bytes(data)
        task.path = path
        tasks.append(task)
    return tasks
