"""Metrics sinks: one JSON line per step and TensorBoard event files.

The event file is written here, in the caller's thread: TFRecord framing of `Event` protos
with a C CRC32C (google-crc32c). TensorBoard's own writer hands each event to a background
thread that computes the CRC in pure Python, which in a training loop holds the GIL that the
trainer needs.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary

if TYPE_CHECKING:
    from posttrain.train.tracking.fanout import Trackers

try:
    from google_crc32c import value as _crc32c
except ImportError:  # pure Python, slower
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import crc32c as _crc32c

FLUSH_EVERY_S = 2.0  # TensorBoard reads what is flushed; the JSONL lines flush every step


def _masked_crc(data: bytes) -> bytes:
    x = _crc32c(data)
    return struct.pack("<I", (((x >> 15) | (x << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


class EventFile:
    """One TensorBoard event file in `log_dir`, appended record by record."""

    def __init__(self, log_dir: Path):
        log_dir.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{id(self)}"
        self.path = log_dir / name
        self._file = self.path.open("wb")
        self._flushed = time.monotonic()
        self._write(Event(wall_time=time.time(), file_version="brain.Event:2"))

    def add_scalars(self, step: int, scalars: dict[str, float]) -> None:
        summary = Summary(value=[Summary.Value(tag=k, simple_value=v) for k, v in scalars.items()])
        self._write(Event(wall_time=time.time(), step=step, summary=summary))

    def _write(self, event: Event) -> None:
        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        self._file.write(header + _masked_crc(header) + data + _masked_crc(data))
        if time.monotonic() - self._flushed >= FLUSH_EVERY_S:
            self.flush()

    def flush(self) -> None:
        self._file.flush()
        self._flushed = time.monotonic()

    def close(self) -> None:
        self._file.close()


class MetricsLog:
    """RUN/metrics.jsonl (every value of a row) and TensorBoard events (its scalars); `trackers`,
    if given (train/tracking/fanout.py), get the scalars of each row too."""

    def __init__(self, run_dir: Path, trackers: Trackers | None = None):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")
        self._tb = EventFile(Path(run_dir) / "tensorboard")
        self._trackers = trackers

    def log(self, phase: str, step: int, values: dict[str, float]) -> None:
        self._file.write(json.dumps({"phase": phase, "step": step, **values}) + "\n")
        self._file.flush()
        scalars = {k: float(v) for k, v in values.items() if isinstance(v, (int, float))}
        # One event per step holding every scalar (an event per scalar costs many times more).
        self._tb.add_scalars(step, {f"{phase}/{k}": v for k, v in scalars.items()})
        if self._trackers is not None:
            self._trackers.log(phase, step, scalars)

    def close(self) -> None:
        self._file.close()
        self._tb.close()
