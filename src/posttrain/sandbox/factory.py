"""Pick a sandbox backend by name: `bwrap` (default), `docker` (needs an engine), `podman`
(the docker backend on the Podman engine), `process` (no isolation, debugging only, never
chosen unless named). This is the one place a backend, and so a container engine, is
chosen. The first sandbox a process opens first reclaims what dead owners left
(sandbox/reaper.py), so every command that opens sandboxes cleans up after killed runs."""

from __future__ import annotations

import functools
import threading

from posttrain.errors import SandboxError
from posttrain.sandbox.base import Sandbox, SandboxSpec

BACKENDS = ("bwrap", "docker", "podman", "process")


_reap_lock = threading.Lock()


@functools.cache
def _reap() -> None:
    from posttrain.sandbox.reaper import reap

    reap()


def reap_once() -> None:
    """The first call reaps; the others (threads opening sandboxes at once) wait for it."""
    with _reap_lock:
        _reap()


def create(backend: str, spec: SandboxSpec) -> Sandbox:
    """A new sandbox of the named backend; unknown names raise SandboxError."""
    reap_once()
    if backend == "bwrap":
        from posttrain.sandbox.bwrap.sandbox import BwrapSandbox

        return BwrapSandbox(spec)
    if backend in ("docker", "podman"):          # one backend over either engine's CLI
        from posttrain.sandbox.docker.cli import chosen
        from posttrain.sandbox.docker.sandbox import DockerSandbox

        return DockerSandbox(spec, chosen(backend))
    if backend == "process":
        from posttrain.sandbox.process import ProcessSandbox

        return ProcessSandbox(spec)
    raise SandboxError(f"unknown sandbox backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
