"""Fixtures for every test."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: tiny matmuls on a busy 2-core machine stall at thread barriers."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
