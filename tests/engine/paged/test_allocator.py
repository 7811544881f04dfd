"""keep_freed_memory: glibc's thresholds are set once per process (engine/paged/allocator.py)."""

import platform

import pytest

from posttrain.engine.paged.allocator import keep_freed_memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_thresholds_are_set_once_and_stay():
    assert keep_freed_memory() is True
    assert keep_freed_memory() is True  # idempotent: the second call changes nothing
