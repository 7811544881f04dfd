"""A container's own changes to its root filesystem, saved and put back: the exported layer
that an episode checkpoint keeps beside its /app, /tmp and /logs (agent/checkpoint.py).

`docker diff` lists what the container added (A), changed (C) or deleted (D) against its image;
its mounts (/app, /tmp, /logs, /tests, /solution) are left out. What was added or changed is packed by tar inside the container
(`--no-recursion`: a changed directory is its entry, not its whole tree; every added file has
an entry of its own), what was deleted is listed. Put back into a fresh container of the same
image: the deleted paths removed, then the tar unpacked over /. Only a container with a writable
root (a root task) has such changes; a read-only root has none.
"""

from __future__ import annotations

import json
from pathlib import Path

from posttrain.errors import SandboxError
from posttrain.sandbox.docker import cli as engine

LAYER, DELETED = "layer.tar", "deleted.json"
# Paths the engine itself manages in every container: never part of what the task changed.
# --init's binary is bound in by the engine too (docker-init; podman's catatonit as /run/podman-init).
ENGINE_PATHS = ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf", "/dev", "/proc", "/sys", "/run/.containerenv",
                "/usr/sbin/docker-init", "/run/podman-init")


def changes(cli: str, container: str) -> tuple[list[str], list[str]]:
    """(added or changed paths, deleted paths) of the container's root, outside its mounts."""
    out = engine.run(cli, "diff", container, timeout=120).stdout.decode()
    mounts = engine.inspect(cli, container, "{{range .Mounts}}{{.Destination}} {{end}}").split()
    skip = tuple(mounts) + ENGINE_PATHS
    kept, deleted = [], []
    for line in out.splitlines():
        kind, _, path = line.partition(" ")
        if not path or any(path == s or path.startswith(s.rstrip("/") + "/") for s in skip):
            continue
        (deleted if kind == "D" else kept).append(path)
    return kept, deleted


def export_layer(cli: str, container: str, dest: Path) -> bool:
    """Write the container's changes under dest; False when it has none (nothing written)."""
    kept, deleted = changes(cli, container)
    if not kept and not deleted:
        return False
    dest.mkdir(parents=True, exist_ok=True)
    if kept:
        names = b"\0".join(p.lstrip("/").encode() for p in kept)
        done = engine.run(cli, "exec", "-i", "-u", "0:0", container, "tar", "-cf", "-", "--no-recursion",
                          "--null", "-C", "/", "-T", "-", stdin=names, timeout=300, check=False)
        if done.returncode != 0:
            raise SandboxError(f"exporting the container's changes failed: "
                               f"{engine.last_line(done.stderr.decode(errors='replace'))}")
        (dest / LAYER).write_bytes(done.stdout)
    (dest / DELETED).write_text(json.dumps(deleted))
    return True


def import_layer(cli: str, container: str, src: Path) -> None:
    """Apply changes written by export_layer to a (running) container of the same image."""
    deleted = json.loads((src / DELETED).read_text()) if (src / DELETED).is_file() else []
    if deleted:
        names = b"\0".join(p.encode() for p in deleted)
        engine.run(cli, "exec", "-i", "-u", "0:0", container, "xargs", "-0", "rm", "-rf", "--",
                   stdin=names, timeout=120)
    if (src / LAYER).is_file():
        engine.run(cli, "exec", "-i", "-u", "0:0", container, "tar", "-xpf", "-", "-C", "/",
                   stdin=(src / LAYER).read_bytes(), timeout=300)
