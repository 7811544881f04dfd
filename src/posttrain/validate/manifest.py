"""The validation manifest: what training and evaluation read to leave bad tasks out.

    {"version": 1, "created": ..., "config": {...}, "counts": {"ok": 60, ...},
     "tasks": [{"id", "path", "status", "reasons", "checks": {...}, "difficulty", ...}]}
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Iterable, TypeVar

from posttrain.errors import ConfigError
from posttrain.validate.record import STATUSES, TaskReport
from posttrain.validate.state import write_json_atomic

T = TypeVar("T")
USABLE = ("ok",)


def manifest_dict(reports: list[TaskReport], config: dict, policy: dict | None = None) -> dict:
    reports = sorted(reports, key=lambda r: (STATUSES.index(r.status), r.id))
    counts = {s: sum(r.status == s for r in reports) for s in STATUSES}
    return {"version": 1, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "config": config, "policy": policy, "counts": counts,
            "tasks": [r.to_dict() for r in reports]}


def write_manifest(path: Path, data: dict) -> Path:
    write_json_atomic(Path(path), data)
    return Path(path)


def load_manifest(path: str | Path) -> dict[str, str]:
    """task id -> status (ok, broken, flaky, hackable, weak-verifier) from a manifest file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return {t["id"]: t["status"] for t in data["tasks"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{path}: not a validation manifest ({type(e).__name__}: {e})") from None


def usable_tasks(tasks: Iterable[T], manifest: dict[str, str] | str | Path,
                 allow: Iterable[str] = USABLE) -> list[T]:
    """The tasks (anything with an `.id`) whose manifest status is in `allow`. A task the
    manifest does not list is left out too: it was never validated."""
    statuses = manifest if isinstance(manifest, dict) else load_manifest(manifest)
    allowed = set(allow)
    return [t for t in tasks if statuses.get(t.id) in allowed]


def load_manifest_tasks(path: str | Path) -> dict[str, dict]:
    """task id -> {"status", "successes", "n"} (successes and n from the difficulty
    calibration, None without one): what a curriculum starts from."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        out = {}
        for t in data["tasks"]:
            diff = t.get("difficulty") or {}
            out[t["id"]] = {"status": t["status"], "successes": diff.get("successes"), "n": diff.get("n")}
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ConfigError(f"{path}: not a validation manifest ({type(e).__name__}: {e})") from None
