"""The ordered record of what the pipeline did (events.jsonl): groups issued and finished
with their versions, batches trained, weights published. With async rollouts this order
is the part of a run that the seed does not fix; the record lets it be inspected or replayed."""

from __future__ import annotations

import json
from pathlib import Path


class EventLog:
    def __init__(self, path: Path | None):
        self.path = path
        self.count = 0
        self._file = path.open("a", encoding="utf-8") if path is not None else None

    def emit(self, kind: str, **fields) -> None:
        """Append one event; callers hold the pipeline lock, so the order is the real one."""
        self.count += 1
        if self._file is not None:
            self._file.write(json.dumps({"n": self.count, "event": kind, **fields}) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
