"""The `docker run` flags that isolate a sandbox's container, as strict as bwrap where the
engine allows (docs/sandbox-threats.md; what docker leaves open: docs/sandbox-docker.md): no
network unless the spec says public (or the compose project's internal network); the engine's
default seccomp profile; every capability dropped; no new privileges; a read-only root filesystem
unless a root user asks for it, which gets the few capabilities package managers need; memory
(swap included), pids and CPU limits; /app, /tmp and /logs bound from the sandbox's host dir, the
staged mount points read-only."""

from __future__ import annotations

import os

from posttrain.sandbox import hostdir
from posttrain.sandbox.docker import cli as engine

ROOT_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL")
DEFAULT_MEMORY_MB, DEFAULT_PIDS, DEFAULT_DISK_MB, SHM_MB = 2048, 512, 2048, 64


def run_args(sb) -> list[str]:
    """`docker run` arguments (before the user, workdir and image) for DockerSandbox `sb`."""
    s = sb.spec
    memory = s.memory_mb or DEFAULT_MEMORY_MB
    args = ["run", "-d", "--name", sb.id, "--label", f"{engine.LABEL}={os.getpid()}",
            *network_args(sb), *sb.container_cli.run_flags(), "--init",
            "--hostname", "sandbox", "--ipc", "private", "--shm-size", f"{SHM_MB}m",
            "--security-opt", "no-new-privileges", "--cap-drop", "ALL",
            "--memory", f"{memory}m", "--memory-swap", f"{memory}m",
            "--pids-limit", str(s.pids or DEFAULT_PIDS), "-e", "HOME=/app"]
    if sb.writable_root:    # root gets the few capabilities package managers need
        args += [a for cap in ROOT_CAPS for a in ("--cap-add", cap)]
    else:
        args += ["--read-only"]
    if s.cpus:
        args += ["--cpus", str(s.cpus)]
    for name in hostdir.WRITABLE:
        args += ["-v", f"{sb.root / name}:/{name}"]
    for point in s.mount_points:
        args += ["-v", f"{sb.staged_path(point)}:{point}:ro"]
    for k, v in s.env.items():
        args += ["-e", f"{k}={v}"]
    return args


def network_args(sb) -> list[str]:
    if sb.compose:              # the project's network; sidecars reach it as `main`
        return ["--network", sb.compose.network, "--network-alias", "main"]
    return ["--network", "bridge" if sb.spec.network == "public" else "none"]
