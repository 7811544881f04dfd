"""The built-in generated suites, one line each: name -> module with generate() and SUITE.

A suite module exposes `generate(out_dir, n_tasks, seed, split, knobs=None)` and writes
ordinary Harbor task directories; `knobs` are the `--knob KEY=VALUE` strings, checked by
the suite (an unknown knob or a value out of range is a PosttrainError).
"""

from __future__ import annotations

import importlib

from posttrain.errors import PosttrainError

SUITES = {
    "terminal-basics": "posttrain.tasks.suites.terminal_basics",
    "terminal-tools": "posttrain.tasks.suites.terminal_tools",
    "code": "posttrain.tasks.suites.code",
}


def generate(suite: str, out_dir, n_tasks: int, seed: int, split: str = "train",
             knobs: dict[str, str] | None = None) -> list:
    """Write n_tasks tasks of the named suite under out_dir; returns them."""
    if suite not in SUITES:
        raise PosttrainError(f"unknown suite {suite!r}; known: {', '.join(sorted(SUITES))}")
    module = importlib.import_module(SUITES[suite])
    return module.generate(out_dir, n_tasks, seed=seed, split=split, knobs=knobs or {})
