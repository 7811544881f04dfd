"""The Harbor job layout on disk, written so that a killed job resumes exactly once per trial.

jobs/<job>/config.json                  the job's conditions (refused if changed)
jobs/<job>/result.json                  the summary (rewritten as trials finish)
jobs/<job>/<task>__<i>/config.json      one trial: its conditions and task
                       result.json      its TrialRecord
                       agent/trajectory.json
                       verifier/        reward and test output

A trial directory is built under a hidden temporary name and renamed into place in one
atomic step, so after a SIGKILL each trial is either wholly there or absent; absent ones
are run again, leftovers of half-built ones are deleted. A lock file keeps a second
process off a job that is running.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path

from posttrain.errors import ConfigError
from posttrain.evals.conditions import EvalConditions, check_same
from posttrain.evals.record import TrialOutput, TrialRecord, trial_dir

PARTIAL_PREFIX = ".partial-"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def strict(x):
    """NaN and infinities as null, so the file is strict JSON (e.g. an undefined correlation)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: strict(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [strict(v) for v in x]
    return x


def write_json(path: Path, data) -> None:
    """Write JSON via a temporary file and rename, so readers never see half a file."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
    text = json.dumps(strict(data), indent=2, default=str, allow_nan=False)
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, path)


class JobDir:
    """One job directory, held open (and locked) while trials run."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = None

    def open(self, conditions: EvalConditions) -> "JobDir":
        """Create or reopen; refuse different conditions or a job held by another process."""
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.path / ".lock", "w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"job {self.path} is being run by another process") from None
        cfg = self.path / "config.json"
        if cfg.is_file():
            check_same(self.conditions(), conditions, self.path.name)
        else:
            write_json(cfg, {"job_name": self.path.name, "created_at": now_iso(),
                             "conditions": conditions.to_dict()})
        for stale in self.path.glob(PARTIAL_PREFIX + "*"):
            shutil.rmtree(stale, ignore_errors=True)
        return self

    def close(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def conditions(self) -> EvalConditions:
        cfg = self.path / "config.json"
        if not cfg.is_file():
            raise ConfigError(f"{self.path}: not an eval job (no config.json)")
        return EvalConditions.from_dict(json.loads(cfg.read_text())["conditions"])

    def records(self) -> list[TrialRecord]:
        """Every finished trial, sorted by task then attempt."""
        out = []
        for p in sorted(self.path.glob("*/result.json")):
            if not p.parent.name.startswith("."):
                out.append(TrialRecord.from_json(json.loads(p.read_text())))
        return sorted(out, key=lambda r: (r.task_name, r.attempt))

    def done(self) -> set[tuple[str, int]]:
        return {(r.task_name, r.attempt) for r in self.records()}

    def write_trial(self, out: TrialOutput, trial_config: dict) -> Path:
        """Build the trial under a temporary name, then rename it into place."""
        rec = out.record
        final = trial_dir(self.path, rec.task_name, rec.attempt)
        if final.exists():
            raise RuntimeError(f"trial {final.name} already written")
        tmp = self.path / f"{PARTIAL_PREFIX}{final.name}-{uuid.uuid4().hex[:8]}"
        (tmp / "agent").mkdir(parents=True)
        (tmp / "verifier").mkdir()
        write_json(tmp / "config.json", trial_config)
        write_json(tmp / "agent" / "trajectory.json", out.trajectory)
        for name, text in out.verifier_files.items():
            (tmp / "verifier" / name).write_text(text, encoding="utf-8")
        write_json(tmp / "result.json", rec.to_json())
        _fsync_dir(tmp)
        os.rename(tmp, final)
        _fsync_dir(self.path)
        return final

    def write_summary(self, summary: dict) -> None:
        write_json(self.path / "result.json", summary)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_existing(path: str | Path) -> JobDir:
    """A finished or running job, for reading (reports); no lock taken."""
    job = JobDir(Path(path))
    job.conditions()  # raises a clear error if this is not a job
    return job
