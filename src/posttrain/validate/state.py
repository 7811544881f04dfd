"""Resumable validation: each finished check is saved at once, per task, atomically.

A task's saved checks are reused only while its files (names, sizes, mtimes, modes,
link targets) and the validation settings are unchanged, so an interrupted run picks
up where it stopped and an edited task is checked again from scratch.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from posttrain.validate.record import Check


def fingerprint(root: Path) -> str:
    h = hashlib.sha256()
    for top, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            p = Path(top) / name
            st = p.lstat()
            link = os.readlink(p) if p.is_symlink() else ""
            h.update(f"{p.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_mode}\0"
                     f"{link}\n".encode())
    return h.hexdigest()[:24]


def write_json_atomic(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


class CheckStore:
    """checks/<task id>.json under a state directory."""

    def __init__(self, directory: Path, config_digest: str):
        self.dir, self.config_digest = Path(directory), config_digest

    def _path(self, task_id: str) -> Path:
        return self.dir / f"{task_id}.json"

    def load(self, task_id: str, fp: str) -> dict:
        """Saved entry for this task: {"checks": {name: Check}, "difficulty": {...}}."""
        try:
            data = json.loads(self._path(task_id).read_text())
        except (OSError, ValueError):
            return {"checks": {}, "difficulty": {}}
        if data.get("fingerprint") != fp or data.get("config") != self.config_digest:
            return {"checks": {}, "difficulty": {}}
        return {"checks": {k: Check.from_dict(v) for k, v in data.get("checks", {}).items()},
                "difficulty": data.get("difficulty", {})}

    def save(self, task_id: str, fp: str, entry: dict) -> None:
        write_json_atomic(self._path(task_id), {
            "fingerprint": fp, "config": self.config_digest,
            "checks": {k: c.to_dict() for k, c in entry["checks"].items()},
            "difficulty": entry.get("difficulty", {})})
