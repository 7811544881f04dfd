"""Settings of `posttrain validate`: how many runs, which thresholds, which sandbox."""

from __future__ import annotations

import hashlib
import json

from pydantic import Field

from posttrain.config_base import StrictModel

MAX_MUTANTS = 64   # each mutant is one sandbox run: more only burns time


class ValidateConfig(StrictModel):
    oracle_runs: int = Field(5, ge=1)            # any failure among them = flaky
    determinism_runs: int = Field(2, ge=1)       # extra verifier runs on one unchanged state
    pass_threshold: float = 1.0                  # reward >= this counts as solved
    min_strength: float = Field(0.7, ge=0, le=1)  # mutant kill share below = weak-verifier
    max_mutants: int = Field(8, ge=0, le=MAX_MUTANTS)  # --mutation-budget; 0 skips the check
    max_file_mb: float = Field(50.0, gt=0)       # any one file larger = broken
    max_task_mb: float = Field(200.0, gt=0)      # the whole task directory
    max_files: int = Field(10_000, ge=1)
    backend: str = "bwrap"
    probe_timeout_s: float = Field(30.0, gt=0)   # each scripted agent / mutation step

    def solved(self, reward: float) -> bool:
        return reward >= self.pass_threshold - 1e-9

    def digest(self) -> str:
        """Changes whenever a setting that affects a check's outcome changes."""
        data = self.model_dump(exclude={"backend"})
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
