"""Read a child's stdout and stderr concurrently, capped, under a wall-clock deadline.

Both streams are drained as they arrive so a flood never blocks the child and never
fills our memory: the first `limit` bytes of each are kept, the rest is counted and
dropped. Past `hard_limit` bytes in total the command is killed (killed_by="output").
"""

from __future__ import annotations

import os
import selectors
import time
from dataclasses import dataclass, field
from typing import Callable

CHUNK = 64 * 1024


@dataclass
class Captured:
    """What was read from the streams, and why reading stopped."""

    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    total: int = 0
    truncated: bool = False
    timed_out: bool = False
    output_killed: bool = False

    def text(self, name: str) -> str:
        return bytes(getattr(self, name)).decode("utf-8", errors="replace")


def _keep(buf: bytearray, data: bytes, limit: int) -> bool:
    """Append what fits under `limit`; return True when something was dropped."""
    room = limit - len(buf)
    if room > 0:
        buf += data[:room]
    return len(data) > max(room, 0)


def capture(fds: dict[str, int], *, deadline: float, limit: int, hard_limit: int,
            kill: Callable[[], None], done: Callable[[], bool],
            grace_s: float = 0.05) -> Captured:
    """Read `fds` ({"stdout": fd, "stderr": fd}, non-blocking) until EOF on both.

    `done()` says the command itself has finished; its streams may still be held
    open by background children, so after that we read for at most `grace_s` more.
    At `deadline` (time.monotonic) or past `hard_limit` bytes, `kill()` is called once.
    """
    out = Captured()
    sel = selectors.DefaultSelector()
    for name, fd in fds.items():
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ, name)
    stop_at: float | None = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if stop_at is None and done():
                stop_at = now + grace_s
            end = min(deadline, stop_at) if stop_at is not None else deadline
            if now >= end:
                if end == deadline and stop_at is None:
                    out.timed_out = True
                    kill()
                break
            for key, _ in sel.select(timeout=min(end - now, 0.05)):
                if not _read_one(sel, key, out, limit):
                    continue
            if out.total > hard_limit and not out.output_killed:
                out.output_killed = True
                kill()
                break
    finally:
        sel.close()
    return out


def _read_one(sel: selectors.BaseSelector, key: selectors.SelectorKey, out: Captured,
              limit: int) -> bool:
    """Read one chunk from a ready fd; unregister it at EOF. False when nothing was read."""
    try:
        data = os.read(key.fd, CHUNK)
    except BlockingIOError:
        return False
    if not data:
        sel.unregister(key.fd)
        return False
    out.total += len(data)
    if _keep(getattr(out, key.data), data, limit):
        out.truncated = True
    return True
