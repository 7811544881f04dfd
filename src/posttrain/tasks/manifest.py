"""Reading a validation manifest (`posttrain validate` writes it: validate/manifest.py):
which tasks it marks usable, and what a curriculum starts from. Here, below the layers that
read it (evals, rollout, recipes), so none of them imports the validator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, TypeVar

from posttrain.errors import ConfigError

T = TypeVar("T")
USABLE = ("ok",)


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
