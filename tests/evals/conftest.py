"""Fixtures for eval tests: a small generated task set and its oracle steps."""

import pytest

from posttrain.tasks.suites import terminal_basics


@pytest.fixture
def task_dir(tmp_path):
    d = tmp_path / "tasks"
    terminal_basics.generate(d, 4, seed=0, split="heldout")
    return d


@pytest.fixture
def oracle(task_dir):
    """{instruction: oracle shell steps}, what the scripted server plays."""
    from scripted_server import oracle_map

    return oracle_map(task_dir)
