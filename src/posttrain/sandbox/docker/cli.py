"""The container engine behind the docker backend: which engine (Docker or Podman), where
its CLI is, that it answers, and its commands run with one clear error line when they fail.

The backend talks to the engine through its CLI, not the Python SDK: the CLI is the
interface Docker and Podman share, it needs no extra dependency, and `docker build`
streams its log as plain text. The engine is chosen once, by backend name (`docker` or
`podman`, `chosen` below); what differs between the two is a row of ENGINES, not a test
of the CLI's file name.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from posttrain.errors import SandboxError

LABEL = "posttrain.sandbox"          # on every container we start: `prune` finds them by it
IMAGE_LABEL = "posttrain.context"    # on every image we build: the build context's hash
ENGINES = {   # what differs between the engines: compose support, rlimits kept at the host's
    "docker": {"supports_compose": True, "keeps_host_rlimits": False},
    "podman": {"supports_compose": False, "keeps_host_rlimits": True},
}


@dataclass(frozen=True)
class ContainerCLI:
    """One engine's CLI: its name (a key of ENGINES), its path, and what it supports."""

    name: str
    path: str
    supports_compose: bool           # docker-compose speaks to dockerd only
    keeps_host_rlimits: bool         # see run_flags

    @classmethod
    def find(cls, name: str) -> "ContainerCLI":
        """The named engine if it answers through its CLI; a one-line SandboxError otherwise."""
        if name not in ENGINES:
            raise SandboxError(f"unknown container engine {name!r}; choose one of: "
                               f"{', '.join(ENGINES)}")
        path = shutil.which(name)
        if path is None:
            raise SandboxError(f"the {name} backend needs a container engine, and there is no "
                               f"`{name}` CLI on PATH; install Docker (or Podman, for the podman "
                               "backend) or use the bwrap backend")
        _check_answers(path, name)
        return cls(name, path, **ENGINES[name])

    def run_flags(self) -> list[str]:
        """Flags one engine needs that another does not. Podman raises the container's
        RLIMIT_NOFILE and RLIMIT_NPROC to its own defaults, which fails where the host denies
        CAP_SYS_RESOURCE (this kind of machine); so under Podman they stay at the host's open
        files limit and 4096 processes per uid (the cgroup pids limit still bounds the sandbox)."""
        if not self.keeps_host_rlimits:
            return []
        import resource

        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        nofile = 1048576 if nofile == resource.RLIM_INFINITY else min(nofile, 1048576)
        return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", "nproc=4096:4096"]


def chosen(backend: str = "docker") -> ContainerCLI:
    """The engine of a backend: `podman` is Podman; `docker` is Docker, or the engine that
    POSTTRAIN_CONTAINER_CLI names (docker or podman: the older way to pick Podman)."""
    name = backend if backend != "docker" else os.environ.get("POSTTRAIN_CONTAINER_CLI", "docker")
    return ContainerCLI.find(name)


def engine_cli() -> str:
    """The docker backend's CLI path, checked to answer (for tests and benchmarks)."""
    return chosen().path


def _check_answers(cli: str, name: str) -> None:
    try:
        done = subprocess.run([cli, "version", "--format", "{{.Server.Version}}"],
                              capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        raise SandboxError(f"the {name} backend needs a running engine; `{name} version` did "
                           "not answer in 15 s") from None
    if done.returncode != 0 or not done.stdout.strip():
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        why = next((ln for ln in lines if "daemon" in ln.lower() or "connect" in ln.lower()),
                   lines[-1] if lines else "no answer")
        raise SandboxError(f"the Docker engine is not running or not reachable (DOCKER_HOST or "
                           f"/var/run/docker.sock): {why.strip()}; start dockerd "
                           "(scripts/ci/docker.sh) or use the bwrap backend")


def run(cli: str, *args: str, timeout: float = 120, check: bool = True,
        stdin: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`cli args...` in `cwd` (what the engine leaves running may write there); raises
    SandboxError with the last stderr line when check and it fails."""
    try:
        done = subprocess.run([cli, *args], capture_output=True, timeout=timeout, input=stdin,
                              cwd=cwd)
    except subprocess.TimeoutExpired:
        raise SandboxError(f"{os.path.basename(cli)} {args[0]} did not finish in {timeout:g} s") \
            from None
    if check and done.returncode != 0:
        raise SandboxError(f"{os.path.basename(cli)} {' '.join(args[:2])} failed: "
                           f"{last_line(done.stderr.decode(errors='replace'))}")
    return done


def last_line(text: str) -> str:
    """The last non-empty line: engines print banners and warnings before the real error."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


def image_exists(cli: str, image: str) -> bool:
    return run(cli, "image", "inspect", image, check=False, timeout=30).returncode == 0


def inspect(cli: str, what: str, fmt: str) -> str:
    return run(cli, "inspect", "--format", fmt, what, timeout=30).stdout.decode().strip()
