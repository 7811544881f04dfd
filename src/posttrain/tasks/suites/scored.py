"""Shared shape of the answer-file suites (finance, longctx, cad): task.toml, test.sh, files.

The verifier is one stdlib-only Python file of ours copied to tests/score.py plus
tests/expected.json. test.sh runs it with the system interpreter by absolute path in
isolated mode without site (`/usr/bin/python3 -I -S`): no PATH lookup, no user or
site packages, no script-directory imports from /app, so nothing the agent wrote can
stand in for it; /tests is bound read-only after the agent phase. The scorer writes
/logs/verifier/reward.json; a crash leaves reward 0 and its trace in score.log.
"""

from __future__ import annotations

import json
from pathlib import Path

from posttrain.tasks.config import TaskConfig
from posttrain.tasks.task import Task

DOCKERFILE = "FROM ubuntu:24.04\nWORKDIR /app\n"
TEST_SH = """#!/bin/bash
# Reward on every path; the exit code is ignored (Harbor contract).
mkdir -p /logs/verifier
/usr/bin/python3 -I -S /tests/score.py > /logs/verifier/score.log 2>&1
[ -s /logs/verifier/reward.json ] || echo 0 > /logs/verifier/reward.txt
"""


def module_source(module) -> str:
    """The text of one of our stdlib-only scorer modules, to ship as tests/score.py."""
    return Path(module.__file__).read_text(encoding="utf-8")


def answer_task(task_id: str, *, domain: str, family: str, difficulty: str, instruction: str,
                app_files: dict[str, str], answer: str, scorer: str, expected: dict,
                knobs: dict, agent_timeout_s: float = 300.0, verifier_timeout_s: float = 60.0,
                memory_mb: int = 1024, steps: list[str] | None = None) -> Task:
    """A task whose agent writes /app/answer.txt (or another file the oracle writes)."""
    config = TaskConfig.model_validate({
        "task": {"name": f"posttrain/{task_id}", "description": instruction.splitlines()[0]},
        "metadata": {"domain": domain, "family": family, "difficulty": difficulty, **knobs},
        "agent": {"timeout_sec": agent_timeout_s},
        "verifier": {"timeout_sec": verifier_timeout_s},
        "environment": {"cpus": 1, "memory_mb": memory_mb, "network_mode": "no-network"},
    })
    copy = "COPY app/ /app/\n" if app_files else ""
    files = {"environment/Dockerfile": DOCKERFILE + copy,
             "solution/solve.sh": f"#!/bin/bash\nset -e\ncd /app\n{answer}\n",
             "solution/steps.json": json.dumps(steps or [answer], indent=1) + "\n",
             "tests/test.sh": TEST_SH, "tests/score.py": scorer,
             "tests/expected.json": json.dumps(expected, indent=1, sort_keys=True) + "\n"}
    files |= {f"environment/app/{rel}": body for rel, body in app_files.items()}
    return Task(id=task_id, instruction=instruction.rstrip() + "\n", config=config,
                path=Path(), files=files)


def write_answer(text: str, path: str = "/app/answer.txt") -> str:
    """A solve.sh line that writes `text` exactly (a quoted heredoc: no expansion)."""
    return f"cat > {path} <<'ANSWER_EOF'\n{text.rstrip()}\nANSWER_EOF"


def known_families(value: str, known) -> str:
    """A `families` knob (comma-separated) whose every name is in `known`; else ValueError."""
    bad = [f for f in value.split(",") if f not in known]
    if bad:
        raise ValueError(f"unknown families {bad}; known: {', '.join(known)}")
    return value
