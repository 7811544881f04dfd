"""Keep freed heap memory for reuse instead of handing it back to the OS after every step.

A decode step at batch 128 allocates and frees several [B, vocab] float32 tensors (25 MB each
on SmolLM2). glibc returns a freed block at the top of the heap to the OS once it exceeds its
trim threshold, so the next step's tensor comes back as fresh pages, and the kernel zeroes
each 4 KB page on first touch: a sizeable share of a bf16 step went to page faults
(docs/engine.md, "Sampling and memory"). Raising the trim threshold and pinning the mmap threshold
at glibc's maximum (32 MB; larger blocks are still mapped and unmapped) keeps those pages;
memory freed stays reusable by the process, as with jemalloc or tcmalloc. Other C libraries
are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
TRIM_BYTES = 1 << 30
MMAP_BYTES = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
_done: bool | None = None


def keep_freed_memory() -> bool:
    """Set glibc's thresholds once per process; True if they are in force."""
    global _done
    if _done is None:
        _done = False
        if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            trim = libc.mallopt(M_TRIM_THRESHOLD, TRIM_BYTES)
            _done = bool(trim) and bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_BYTES))
    return _done
