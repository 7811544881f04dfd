"""Fixtures for the kernel tests: a CPU played without AVX-512."""

import pytest

from posttrain.kernels import gemv


@pytest.fixture
def no_avx512(monkeypatch):
    """Play a CPU without AVX-512 (an AVX2-only one): every GEMV missing."""
    flags = frozenset(f for f in gemv.cpu_flags() if not f.startswith("avx512"))
    monkeypatch.setattr(gemv, "cpu_flags", lambda: flags)
    gemv._say_missing.cache_clear()
    yield
    gemv._say_missing.cache_clear()
