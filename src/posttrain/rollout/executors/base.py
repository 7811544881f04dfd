"""The executor seam: where the rollout loop's waves run.

An executor takes the pipeline's parts (the env and the locked engine) and returns the pair
the pipeline runs on. `LocalExecutor` returns them unchanged: waves run in the pipeline's
threads, as always. `rollout.ray_executor.RayExecutor` returns an env whose waves run on
rollout-worker actors and an engine whose `publish` also reaches every actor's replica. The
pipeline never knows which: the recipe picks the executor once (`cluster.executor`).

A remote env that lost the worker running a wave replaces the worker and raises `WaveLost`;
the pipeline runs the wave again (same groups, same seed) and the ledger counts the attempt.
"""

from __future__ import annotations

from typing import Protocol


class WaveLost(RuntimeError):
    """The worker running a wave died; it has been replaced and the wave may run again."""


class Executor(Protocol):
    def wrap(self, env, engine) -> tuple:
        """(env, engine) for the pipeline."""

    def metrics(self) -> dict:
        """Per-actor numbers since the last call (merged into each step's metrics)."""

    def close(self) -> None:
        """Stop everything the executor started."""


class LocalExecutor:
    """Waves run in the pipeline's own threads (and its engine child process, if any)."""

    def wrap(self, env, engine) -> tuple:
        return env, engine

    def metrics(self) -> dict:
        return {}

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
