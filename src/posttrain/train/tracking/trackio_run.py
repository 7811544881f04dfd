"""trackio: a run in the local store RUN/trackio/ by default (`TRACKIO_DIR=RUN/trackio trackio
show`), or in the Hugging Face Space that tracking.trackio_space names."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

from posttrain.train.tracking.base import numbers
from posttrain.train.tracking.config import TrackingConfig


class TrackioTracker:
    def __init__(self, trackio, run):
        self._trackio = trackio
        self._run = run
        self._last_step = -1

    def log(self, phase: str, step: int, scalars: dict[str, float]) -> None:
        self._run.log({f"{phase}/{k}": v for k, v in scalars.items()}, step=step)
        self._last_step = max(self._last_step, step)

    def finish(self, summary: dict | None) -> None:
        # trackio keeps no summary: its numbers are one row after the last step
        if summary is not None:
            self._run.log({f"summary/{k}": v for k, v in numbers(summary).items()}, step=self._last_step + 1)
        with contextlib.redirect_stdout(io.StringIO()):
            self._trackio.finish()   # the current run, this one; its atexit hook then has none


def _import_trackio(store: Path):
    """trackio reads its store's directory (TRACKIO_DIR) once, when it is first imported."""
    before = os.environ.get("TRACKIO_DIR")
    os.environ["TRACKIO_DIR"] = str(store)
    try:
        import trackio
    finally:
        if before is None:
            del os.environ["TRACKIO_DIR"]
    if Path(trackio.utils.TRACKIO_DIR).resolve() != store.resolve():
        raise RuntimeError(f"this process's trackio store is {trackio.utils.TRACKIO_DIR} (fixed when trackio "
                           f"was imported), not {store}: set TRACKIO_DIR to share one store")
    return trackio


def open_run(cfg: TrackingConfig, run_dir: Path, config: dict, name: str) -> TrackioTracker:
    trackio = _import_trackio(Path(os.environ.get("TRACKIO_DIR") or run_dir / "trackio"))
    with contextlib.redirect_stdout(io.StringIO()):   # its banner; stdout is the progress bars'
        run = trackio.init(project=cfg.project, name=name, config=config, space_id=cfg.trackio_space,
                           embed=False, auto_log_cpu=False, auto_log_gpu=False)
    return TrackioTracker(trackio, run)
