"""Train-only replay of a recorded run (async included): the batches a run trained on, in
the order it trained on them, fed to a fresh trainer from the same initial weights.

Async scheduling decides which episodes land in which batch; once that is recorded
(`Pipeline(record_dir=...)`, `rollout.record_batches`), the training side is a pure
function of it, so the replay reproduces the run's trainer metrics exactly (loss, grad norm,
mismatch, staleness) without sampling anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from posttrain.rollout.buffer import Group
from posttrain.rollout.pipeline import Pipeline


def recorded_batches(record_dir: Path) -> list[tuple[int, list[Group]]]:
    """(version the batch was trained at, its groups) for every recorded step, in order."""
    out = []
    for path in sorted(Path(record_dir).glob("step-*.json")):
        data = json.loads(path.read_text())
        out.append((data["version"], [Group.from_dict(g) for g in data["groups"]]))
    return out


def replay(pipeline: Pipeline, record_dir: Path, on_step: Callable[[int, dict], None] | None = None) -> None:
    """Train `pipeline`'s trainer on the recorded batches; no rollouts run."""
    for version, groups in recorded_batches(record_dir):
        if version != pipeline.version:
            raise ValueError(f"step {pipeline.step}: recorded at version {version}, "
                             f"replaying at {pipeline.version} (start from the run's initial weights)")
        for g in groups:  # the ledger sees them come through the buffer, as in the run
            pipeline.ledger.issue(g.uid, g.job.task_id)
            pipeline.ledger.start(g.uid)
            pipeline.ledger.buffer(g.uid)
        stats = pipeline.train_on(groups)
        if on_step is not None:
            on_step(pipeline.step, stats)
        pipeline.step += 1
