"""The validation manifest: what training and evaluation read to leave bad tasks out (the
readers live in tasks/manifest.py, below every layer that reads it).

    {"version": 1, "created": ..., "config": {...}, "counts": {"ok": 60, ...},
     "tasks": [{"id", "path", "status", "reasons", "checks": {...}, "difficulty", ...}]}
"""

from __future__ import annotations

import time
from pathlib import Path

from posttrain.tasks.manifest import USABLE, load_manifest, load_manifest_tasks, usable_tasks
from posttrain.validate.record import STATUSES, TaskReport
from posttrain.validate.state import write_json_atomic

__all__ = ["USABLE", "load_manifest", "load_manifest_tasks", "manifest_dict", "usable_tasks",
           "write_manifest"]


def manifest_dict(reports: list[TaskReport], config: dict, policy: dict | None = None) -> dict:
    reports = sorted(reports, key=lambda r: (STATUSES.index(r.status), r.id))
    counts = {s: sum(r.status == s for r in reports) for s in STATUSES}
    return {"version": 1, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "config": config, "policy": policy, "counts": counts,
            "tasks": [r.to_dict() for r in reports]}


def write_manifest(path: Path, data: dict) -> Path:
    write_json_atomic(Path(path), data)
    return Path(path)
