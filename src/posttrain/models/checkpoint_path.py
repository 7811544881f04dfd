"""The model directory a `--model` path names, for `posttrain serve` and `posttrain eval` alike:
an HF checkpoint directory itself (config.json), a run's step directory
(RUN/checkpoints/step-000040, whose model/ holds the weights) or the run's `latest` pointer
(RUN/checkpoints/latest, a file naming the newest step)."""

from __future__ import annotations

from pathlib import Path

from posttrain.errors import PosttrainError


def model_dir(path: str | Path) -> Path | None:
    """The HF checkpoint directory `path` names, or None when it names none."""
    p = Path(path).expanduser()
    if p.name == "latest" and p.is_file():           # RUN/checkpoints/latest -> step-N
        p = p.parent / p.read_text(encoding="utf-8").strip()
    for candidate in (p, p / "model"):
        if (candidate / "config.json").is_file():
            return candidate
    return None


def require_model_dir(path: str | Path) -> Path:
    """As model_dir, but a path that names no checkpoint is a one-line error."""
    found = model_dir(path)
    if found is None:
        raise PosttrainError(f"--model {path}: not a model directory (no config.json); give an HF checkpoint "
                             "directory, a run's checkpoints/step-N, or its checkpoints/latest")
    return found
