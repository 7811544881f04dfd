"""Isolated command execution with limits. Knows nothing of models or rewards."""

from posttrain.sandbox.base import Sandbox, SandboxSpec

__all__ = ["Sandbox", "SandboxSpec", "open_sandbox"]


def open_sandbox(backend: str = "bwrap", spec: SandboxSpec | None = None) -> Sandbox:
    """Create a sandbox. `process` (no isolation) is only for debugging and must be named."""
    from posttrain.sandbox.factory import create

    return create(backend, spec or SandboxSpec())
