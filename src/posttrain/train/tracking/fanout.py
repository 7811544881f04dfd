"""The run's experiment trackers, chosen here by `tracking.backends`: each gets the config
once, every metrics row and the summary at the end. One that fails mid-run is dropped with
one warning and the run goes on; metrics.jsonl stays the record."""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from pathlib import Path
from typing import Self

from posttrain.errors import PosttrainError
from posttrain.train.tracking.base import Tracker
from posttrain.train.tracking.config import TrackingConfig

# tracking.backends -> (its adapter module, the libraries it imports; the extra is the name)
BACKENDS = {
    "wandb": ("posttrain.train.tracking.wandb_run", ("wandb",)),
    "mlflow": ("posttrain.train.tracking.mlflow_run", ("mlflow", "alembic")),
    "trackio": ("posttrain.train.tracking.trackio_run", ("trackio",)),
}


def _check_libraries(backends: list[str]) -> None:
    """A missing library is one line naming its extra, before any tracker starts."""
    for name in backends:
        missing = [lib for lib in BACKENDS[name][1] if importlib.util.find_spec(lib) is None]
        if missing:
            raise PosttrainError(f"tracking.backends has \"{name}\" but {', '.join(missing)} is not "
                                 f"installed: pip install -c constraints.txt -e '.[{name}]'")


class Trackers:
    """Opened at the start of a run (an error there stops it before it trains), finished with
    the summary at its end, or as failed when the run raises (the `with` block)."""

    def __init__(self, cfg: TrackingConfig, run_dir: Path, config: dict, run_name: str):
        _check_libraries(cfg.backends)
        self._live: dict[str, Tracker] = {}
        for name in cfg.backends:
            adapter = importlib.import_module(BACKENDS[name][0])
            try:
                self._live[name] = adapter.open_run(cfg, Path(run_dir), config, cfg.run_name or run_name)
            except Exception as e:
                self.finish(None)
                raise PosttrainError(f"tracking: {name} could not start: {_one_line(e)}") from e

    def log(self, phase: str, step: int, scalars: dict[str, float]) -> None:
        for name, tracker in list(self._live.items()):
            self._guard(name, f"{phase} step {step}", tracker.log, phase, step, scalars)

    def finish(self, summary: dict | None) -> None:
        """Close every tracker; summary None marks the run failed. Idempotent."""
        for name, tracker in list(self._live.items()):
            self._guard(name, "finish", tracker.finish, summary)
        self._live.clear()

    def _guard(self, name: str, when: str, call, *args) -> None:
        try:
            call(*args)
        except Exception as e:  # noqa: BLE001 - whatever a tracker raises, training goes on
            del self._live[name]
            warnings.warn(f"tracking: {name} failed at {when} ({_one_line(e)}); the run goes on "
                          "without it, and metrics.jsonl keeps every row", stacklevel=3)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.finish(None)   # no-op after finish(summary)


def _one_line(e: Exception, chars: int = 300) -> str:
    """A library's error as one line (its lines joined), cut at `chars`."""
    text = " / ".join(line.strip() for line in str(e).splitlines() if line.strip())
    text = f"{type(e).__name__}: {text}" if text else type(e).__name__
    return text if len(text) <= chars else text[:chars - 3] + "..."
