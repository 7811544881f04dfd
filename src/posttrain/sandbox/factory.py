"""Pick a sandbox backend by name: `bwrap` (default), `docker` (needs an engine),
`process` (no isolation, debugging only, never chosen unless named)."""

from __future__ import annotations

from posttrain.errors import SandboxError
from posttrain.sandbox.base import Sandbox, SandboxSpec

BACKENDS = ("bwrap", "docker", "process")


def create(backend: str, spec: SandboxSpec) -> Sandbox:
    """A new sandbox of the named backend; unknown names raise SandboxError."""
    if backend == "bwrap":
        from posttrain.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox(spec)
    if backend == "docker":
        from posttrain.sandbox.docker import DockerSandbox

        return DockerSandbox(spec)
    if backend == "process":
        from posttrain.sandbox.process import ProcessSandbox

        return ProcessSandbox(spec)
    raise SandboxError(f"unknown sandbox backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
