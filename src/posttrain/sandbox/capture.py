"""Read a command's stdout and stderr concurrently, capped, under a wall-clock deadline.

Both streams are drained as they arrive so a flood never blocks the child and never
fills our memory: the first `limit` bytes of each are kept, the rest is counted and
dropped. Past `hard_limit` bytes in total the command is killed (killed_by="output").
Streams still held open by background children after the command ended are handed
to a `Sink`, which discards their output until they close, so those children neither
block nor die of SIGPIPE.
"""

from __future__ import annotations

import os
import selectors
import threading
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
    lingering: list[int] = field(default_factory=list)   # fds still open at the end

    def text(self, name: str) -> str:
        return bytes(getattr(self, name)).decode("utf-8", errors="replace")


def capture(fds: dict[str, int], *, deadline: float, limit: int, hard_limit: int,
            kill: Callable[[], None], done: Callable[[], bool],
            control: dict[int, Callable[[bytes], None]] | None = None,
            on_done: Callable[[], None] | None = None, grace_s: float = 0.05) -> Captured:
    """Read `fds` ({"stdout": fd, "stderr": fd}) until EOF on both, or until stopped.

    `control` fds feed their bytes (b"" at EOF) to a callback instead of the output.
    `done()` says the command itself has finished; `on_done()` runs once when it first
    does, and then we read for at most `grace_s` more. At `deadline` (time.monotonic)
    or past `hard_limit` bytes, `kill()` is called once and reading stops.
    """
    out = Captured()
    sel = selectors.DefaultSelector()
    for name, fd in fds.items():
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ, name)
    for fd, callback in (control or {}).items():
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ, callback)
    stop_at: float | None = None
    try:
        while any(isinstance(k.data, str) for k in sel.get_map().values()):
            now = time.monotonic()
            if stop_at is None and done():
                stop_at = now + grace_s
                if on_done:
                    on_done()
            if stop_at is None and now >= deadline:
                out.timed_out = True
                kill()
                break
            if stop_at is not None and now >= stop_at:
                break
            end = deadline if stop_at is None else stop_at
            for key, _ in sel.select(timeout=max(0.0, min(end - now, 0.25))):
                _read_one(sel, key, out, limit)
            if out.total > hard_limit:
                out.output_killed = True
                kill()
                break
        out.lingering = [k.fd for k in sel.get_map().values() if isinstance(k.data, str)]
    finally:
        sel.close()
    return out


def _read_one(sel: selectors.BaseSelector, key: selectors.SelectorKey, out: Captured,
              limit: int) -> None:
    """Read one chunk from a ready fd; unregister it at EOF."""
    try:
        data = os.read(key.fd, CHUNK)
    except BlockingIOError:
        return
    if not data:
        sel.unregister(key.fd)
    if callable(key.data):
        key.data(data)
        return
    out.total += len(data)
    buf = getattr(out, key.data)
    room = limit - len(buf)
    if room > 0:
        buf += data[:room]
    if len(data) > max(room, 0):
        out.truncated = True


class Sink:
    """A daemon thread that reads and drops output from fds nobody waits on any more."""

    def __init__(self):
        self._sel = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def adopt(self, fds: list[int]) -> None:
        """Take ownership of `fds`: they are drained, then closed at EOF or by close()."""
        with self._lock:
            for fd in fds:
                self._sel.register(fd, selectors.EVENT_READ)
            if fds and self._thread is None:
                self._thread = threading.Thread(target=self._loop, daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._lock:
                if not self._sel.get_map():
                    self._thread = None
                    return
            for key, _ in self._sel.select(timeout=0.1):
                try:
                    data = os.read(key.fd, CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    self._drop(key.fd)

    def _drop(self, fd: int) -> None:
        with self._lock:
            try:
                self._sel.unregister(fd)
            except (KeyError, ValueError):
                return
        os.close(fd)

    def close(self) -> None:
        """Close every adopted fd (the processes holding the other ends are dead by now)."""
        with self._lock:
            fds = [k.fd for k in self._sel.get_map().values()]
        for fd in fds:
            self._drop(fd)
