"""What every tracker adapter offers, and the flattening of nested config and summary dicts
that the flat ones (MLflow, trackio) need."""

from __future__ import annotations

from typing import Protocol


class Tracker(Protocol):
    def log(self, phase: str, step: int, scalars: dict[str, float]) -> None:
        """One metrics row: its scalars, keyed `phase/name` in the tracker."""

    def finish(self, summary: dict | None) -> None:
        """The run's summary.json (None: the run failed), then close."""


def leaves(tree: dict, prefix: str = "") -> dict:
    """{"a": {"b": 1}} -> {"a.b": 1}: every non-dict value under its dotted key."""
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out |= leaves(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def numbers(tree: dict) -> dict[str, float]:
    """The numeric leaves (booleans as 0 or 1), as floats."""
    return {k: float(v) for k, v in leaves(tree).items() if isinstance(v, (int, float))}
