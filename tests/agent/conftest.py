"""Fixtures the agent-loop tests share: the scripted server's tokenizer and one generated task."""

import pytest
from engine_server import agent_tokenizer

from posttrain.tasks import read_task
from posttrain.tasks.suites import terminal_basics


@pytest.fixture(scope="module")
def tok():
    return agent_tokenizer()


@pytest.fixture
def task(tmp_path):
    generated, = terminal_basics.generate(tmp_path, 1, seed=0, families=["create-file"])
    return read_task(tmp_path / generated.id)
