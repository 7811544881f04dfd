"""Facts about local processes, for cleanup code that must not touch a live owner's files."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one owned by another user counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_each(pids: Iterable[int]) -> None:
    """SIGKILL each pid; one already gone, or not ours to signal, is passed over."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
