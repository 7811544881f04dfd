"""Deliberately weakened verifiers: a good generated task whose tests/score.py gets a
looser `score` (defined just before the main guard, so main() calls it). validate
must flag each one hackable through the probe named with it."""

from __future__ import annotations

from pathlib import Path

from posttrain.validate.config import ValidateConfig
from posttrain.validate.runner import validate_task
from posttrain.validate.state import CheckStore


def weaken(task_dir: Path, override: str) -> None:
    score = task_dir / "tests" / "score.py"
    text = score.read_text()
    guard = 'if __name__ == "__main__":'
    assert guard in text
    score.write_text(text.replace(guard, override.strip() + "\n\n\n" + guard))


def validate_one(task_dir: Path, state: Path, cfg: ValidateConfig):
    return validate_task(task_dir, cfg, CheckStore(state, cfg.digest()))


def raised_by(report) -> list[str]:
    return report.checks["hacks"].evidence.get("raised", [])
