"""The Sandbox interface: an isolated place to run commands, with limits.

A sandbox has four writable areas that the host can read and write directly:
/app (the task's working directory), /tmp, /logs, plus read-only mounts that the
harness adds (/tests after the agent phase, /solution for the oracle).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path

from posttrain.types import ExecResult

DEFAULT_OUTPUT_LIMIT = 64 * 1024


@dataclass
class SandboxSpec:
    """What one sandbox may use. None means the backend's default."""

    network: str = "no-network"          # "no-network" | "public"
    memory_mb: int | None = None
    pids: int | None = None
    cpus: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/app"
    output_limit: int = DEFAULT_OUTPUT_LIMIT  # bytes kept of stdout and of stderr each
    output_hard_limit: int = 64 * 1024 * 1024  # total bytes read before the command is killed


class Sandbox(abc.ABC):
    """One isolated environment. Use as a context manager; close() reclaims everything."""

    spec: SandboxSpec

    @abc.abstractmethod
    def exec(self, command: str, timeout_s: float = 60.0, env: dict[str, str] | None = None,
             mounts: dict[str, Path] | None = None) -> ExecResult:
        """Run `bash -c command` inside; kill the whole process tree at timeout_s.

        `mounts` maps sandbox paths (e.g. "/tests") to host dirs bound read-only
        for this command only.
        """

    @abc.abstractmethod
    def host_path(self, sandbox_path: str) -> Path:
        """The host path backing a path under /app, /tmp or /logs (for copy in/out)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Kill everything still running and delete the sandbox's files. Idempotent."""

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
