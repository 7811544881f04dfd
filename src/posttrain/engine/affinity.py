"""Give a child process a core of its own and keep the calling thread off it.

With the engine in a child process, the trainer (this process) and the engine (the child)
each keep one core busy. Left to the scheduler they migrate between cores and evict each
other's caches; pinned, a 2-core RL step of the benchmark is faster (docs/rl.md, "Two loops
around a buffer").
Threads that the calling thread starts inside the block inherit its mask (so do their
subprocesses): they share the trainer's cores, never the engine's.
"""

from __future__ import annotations

import contextlib
import os
import threading


@contextlib.contextmanager
def split_cores(child_pid: int, child_cores: int = 1):
    """Pin child_pid to the last `child_cores` of this thread's allowed cores and this thread
    to the others; restore this thread's mask on exit. A no-op where the platform has no
    sched_setaffinity or too few cores are allowed."""
    if not hasattr(os, "sched_setaffinity"):
        yield None
        return
    me = threading.get_native_id()
    allowed = sorted(os.sched_getaffinity(me))
    if len(allowed) <= child_cores:
        yield None
        return
    engine, trainer = set(allowed[-child_cores:]), set(allowed[:-child_cores])
    try:
        os.sched_setaffinity(child_pid, engine)
    except ProcessLookupError:  # the child is gone: its owner reports that
        yield None
        return
    os.sched_setaffinity(me, trainer)
    try:
        yield engine
    finally:
        os.sched_setaffinity(me, set(allowed))
