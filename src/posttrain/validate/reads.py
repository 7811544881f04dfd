"""Which files a verifier run reads, from their access times.

Before the verifier runs, the host sets each candidate file's atime to 0 (mtime kept);
reading a file inside the sandbox then moves its atime forward. Linux updates atime under
the default `relatime` whenever atime is not later than mtime, so every candidate read at
least once is seen, whatever the backend (bwrap and Docker both bind the sandbox's /app and
/tmp from one host directory). Nothing runs inside the sandbox but one canary read, which
says whether the mount updates atimes at all (`noatime` would not): without it the trace is
None, never an empty set. A stat or an existence test is not a read.
"""

from __future__ import annotations

import os

from posttrain.sandbox import Sandbox

CANARY = "/tmp/.posttrain-atime-canary"


def _clear(host) -> bool:
    try:
        st = os.stat(host, follow_symlinks=False)
        os.utime(host, ns=(0, st.st_mtime_ns), follow_symlinks=False)
        return True
    except OSError:
        return False


def _read_since(host) -> bool:
    try:
        return os.stat(host, follow_symlinks=False).st_atime_ns > 0
    except OSError:
        return False


def atime_works(sandbox: Sandbox) -> bool:
    """Whether a read inside the sandbox moves a file's atime (one `cat` of a canary)."""
    host = sandbox.host_path(CANARY)
    try:
        host.write_bytes(b"canary\n")
        sandbox.give(host)
        if not _clear(host):
            return False
        sandbox.exec(f"cat {CANARY} >/dev/null", timeout_s=10)
        return _read_since(host)
    finally:
        host.unlink(missing_ok=True)


def start(sandbox: Sandbox, paths: list[str]) -> list[str] | None:
    """Clear the atimes of `paths` (sandbox paths of regular files); the ones traced, or
    None when this sandbox cannot trace reads."""
    if not atime_works(sandbox):
        return None
    traced = [p for p in paths if _clear(sandbox.host_path(p))]
    return traced if traced or not paths else None


def finish(sandbox: Sandbox, traced: list[str] | None) -> list[str] | None:
    """Of the traced paths, those read since start(), in the files the verifier saw (its own
    copy, where the backend gives it one: times are copied with the files)."""
    if traced is None:
        return None
    return [p for p in traced if _read_since(sandbox.verifier_path(p))]
