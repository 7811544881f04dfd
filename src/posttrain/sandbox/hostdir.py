"""A sandbox's directory on the host: writable areas, control files, and a record for the reaper.

Layout of <state dir>/<id>/ (POSTTRAIN_SANDBOX_DIR, default $TMPDIR/posttrain-sandboxes):
app/ tmp/ logs/ (bound writable at /app, /tmp, /logs), ctl/ (runner FIFOs, bound
read-only at /run/ctl), mnt/<n>/ (staged read-only mounts), and
owner.json (our pid and its start time, the bwrap pid, the cgroups) so a later process
can reclaim the sandbox if we crash. When we may mount (root), the whole directory is a
tmpfs of `disk_mb`, which is the disk quota of the writable areas.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import shutil
import tempfile
import uuid
from pathlib import Path

from posttrain.errors import SandboxError

WRITABLE = ("app", "tmp", "logs")
GRACE_S = 60.0    # a sandbox dir without an owner record (or a cgroup) this young may be new


def state_dir() -> Path:
    """Where sandbox directories live on the host (POSTTRAIN_SANDBOX_DIR overrides)."""
    base = os.environ.get("POSTTRAIN_SANDBOX_DIR") or os.path.join(
        tempfile.gettempdir(), "posttrain-sandboxes")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def process_start(pid: int) -> str | None:
    """The kernel's start time of `pid` (field 22 of /proc/pid/stat): pid plus this is unique."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


MNT_DETACH = 2


def _libc():
    return ctypes.CDLL(None, use_errno=True)


UID_RANGE = (0x70000000, 0x7FFF0000)   # far from system users and subordinate-id ranges


def sandbox_host_uid() -> int | None:
    """The unprivileged host uid a new sandbox runs as when we are root: its own, drawn at
    random from UID_RANGE, so sandboxes cannot signal each other even outside their
    namespaces (POSTTRAIN_SANDBOX_UID fixes one for all, e.g. 65534). None when we are
    not root: sandboxes then run as ourselves. Never root: a process that is root on the
    host, even without capabilities, may write root-owned files such as /proc/sys entries."""
    if os.geteuid() != 0:
        return None
    fixed = os.environ.get("POSTTRAIN_SANDBOX_UID")
    uid = int(fixed) if fixed else random.randrange(*UID_RANGE)
    if uid == 0:
        raise SandboxError("POSTTRAIN_SANDBOX_UID=0 would run sandboxed code as host root")
    return uid


def chown_tree(path: Path, uid: int | None) -> None:
    """Give a host-written file or tree to the sandbox's host uid (no-op when None)."""
    if uid is None or not os.path.lexists(path):
        return
    os.chown(path, uid, uid, follow_symlinks=False)
    if os.path.isdir(path) and not os.path.islink(path):
        for top, dirs, files in os.walk(path):
            for name in dirs + files:
                os.chown(os.path.join(top, name), uid, uid, follow_symlinks=False)


def _mount_tmpfs(root: Path, disk_mb: int, uid: int | None) -> bool:
    """mount(2) a size-limited tmpfs on root (a syscall, not a `mount` process: fast)."""
    if os.geteuid() != 0:
        return False
    opts = f"size={disk_mb}m,mode=0755" + (f",uid={uid},gid={uid}" if uid is not None else "")
    return _libc().mount(b"tmpfs", str(root).encode(), b"tmpfs", 0, opts.encode()) == 0


def create_root(sandbox_id: str, disk_mb: int | None,
                uid: int | None = None) -> tuple[Path, bool]:
    """Make the directory tree, owned by `uid` where given; returns (root, whether a
    size-limited tmpfs backs it)."""
    root = state_dir() / sandbox_id
    root.mkdir()
    quota = bool(disk_mb) and _mount_tmpfs(root, disk_mb, uid)
    for name in (*WRITABLE, "ctl", "mnt"):
        (root / name).mkdir()
        if uid is not None:
            os.chown(root / name, uid, uid)
    return root, quota


def write_owner(root: Path, **fields) -> None:
    """Record who owns this sandbox (atomically; read by the reaper)."""
    record = {"owner_pid": os.getpid(), "owner_start": process_start(os.getpid()), **fields}
    tmp = root / "owner.json.tmp"
    tmp.write_text(json.dumps(record))
    os.replace(tmp, root / "owner.json")


def read_owner(root: Path) -> dict | None:
    try:
        return json.loads((root / "owner.json").read_text())
    except (OSError, ValueError):
        return None


def owner_alive(record: dict) -> bool:
    pid = record.get("owner_pid")
    return isinstance(pid, int) and process_start(pid) == record.get("owner_start")


def remove_root(root: Path, tmpfs: bool) -> None:
    """Unmount the quota tmpfs (lazily, if busy) and delete everything."""
    if tmpfs or os.path.ismount(root):
        _libc().umount2(str(root).encode(), MNT_DETACH)
    shutil.rmtree(root, ignore_errors=True)


def sandbox_path(root: Path, sandbox_path_: str) -> Path:
    """Map /app/x, /tmp/x or /logs/x to its host file under `root`, refusing escapes."""
    p = Path(os.path.normpath("/" + sandbox_path_.lstrip("/")))
    parts = p.parts
    if len(parts) < 2 or parts[1] not in WRITABLE:
        raise SandboxError(f"{sandbox_path_!r} is not under /app, /tmp or /logs")
    host = root.joinpath(*parts[1:])
    area = (root / parts[1]).resolve()
    try:
        resolved = host.resolve()
    except (RuntimeError, OSError):      # a symlink loop made inside
        raise SandboxError(f"{sandbox_path_!r} cannot be resolved (symlink loop)") from None
    if resolved != area and area not in resolved.parents:
        raise SandboxError(f"{sandbox_path_!r} is a symlink that leaves the sandbox")
    return host


def stage_mount(target: Path, source: Path, uid: int | None) -> None:
    """Copy dir `source` into a staged mount dir (bound read-only inside), replacing what was
    there; the copy belongs to the sandbox user so it can read files the host keeps private."""
    clear_dir(target)
    shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
    chown_tree(target, uid)


def private_copies(under: Path, mounts: dict[str, Path], uid: int | None) -> dict[str, Path]:
    """{sandbox path: a copy under `under` owned by the sandbox user} (the source may be
    unreadable to it), for a one-off bwrap to bind read-only."""
    copies = {}
    for dest, src in mounts.items():
        copy = under / f"once-{uuid.uuid4().hex[:8]}"
        if Path(src).is_dir():
            shutil.copytree(src, copy, symlinks=True)
        else:
            shutil.copy2(src, copy)
        chown_tree(copy, uid)
        copies[dest] = copy
    return copies


def clear_dir(path: Path) -> None:
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
