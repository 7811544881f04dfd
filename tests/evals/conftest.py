"""Fixtures for eval tests: a small generated task set and its oracle steps."""

import pytest

from posttrain.tasks import load_tasks
from posttrain.tasks.suites import terminal_basics


@pytest.fixture
def task_dir(tmp_path):
    d = tmp_path / "tasks"
    terminal_basics.generate(d, 4, seed=0, split="heldout")
    return d


@pytest.fixture
def oracle(task_dir):
    """{instruction: oracle shell steps}, what the scripted server plays."""
    return {t.instruction: t.oracle_steps() for t in load_tasks(task_dir)}
