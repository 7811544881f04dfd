"""The verifier's own copy of a bwrap sandbox's files, out of reach of what the agent left.

When the agent phase ends, /app, /tmp and /logs are copied as they are into <root>/verify/,
which only the verifier's bwrap binds; its /logs/verifier starts empty. Processes the
agent left running (servers kept for the tests) see the old files, so nothing they write
later changes what the tests read or the reward they write. Regular files are copied
with their modes and times, without moving the source's atime (validate/reads.py traces
the verifier's reads by atime); sockets and FIFOs are hard links to the same inode, so a
server's Unix socket still answers the tests.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from posttrain.sandbox.base import fresh_dir
from posttrain.sandbox.hostdir import WRITABLE, chown_tree

VIEW = "verify"


def freeze(root: Path, uid: int | None) -> Path:
    """<root>/verify/{app,tmp,logs} copied from the agent's, /logs/verifier empty."""
    view = fresh_dir(root / VIEW)
    for name in WRITABLE:
        _copy(root / name, view / name)
    fresh_dir(view / "logs" / "verifier")
    chown_tree(view, uid)
    return view


def drop(root: Path) -> None:
    shutil.rmtree(root / VIEW, ignore_errors=True)


def intruders(agent_side: Path) -> list[str]:
    """What appeared in the agent's /logs/verifier while the verifier ran: only a process
    the agent left running could write it, and only to forge a reward."""
    if agent_side.is_symlink() or not agent_side.is_dir():
        return [agent_side.name]
    return sorted(p.name for p in agent_side.iterdir())


def _copy(src: Path, dst: Path) -> None:
    st = os.lstat(src)
    if stat.S_ISDIR(st.st_mode):
        os.mkdir(dst)
        for entry in os.scandir(src):
            _copy(Path(entry.path), dst / entry.name)
    elif stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dst)
        return
    elif stat.S_ISREG(st.st_mode):
        _copy_bytes(src, dst)
    else:                       # a socket or a FIFO: the same inode, so it still connects
        os.link(src, dst, follow_symlinks=False)
        return
    os.chmod(dst, stat.S_IMODE(st.st_mode))
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))


def _copy_bytes(src: Path, dst: Path) -> None:
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NOATIME)
    except PermissionError:     # O_NOATIME needs the file's owner or CAP_FOWNER
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as r, open(dst, "xb") as w:
        shutil.copyfileobj(r, w, 1 << 20)
