"""`agent.program` as a user writes it: a script path relative to where they run posttrain works,
though the program runs in a fresh directory per episode; an empty argv is refused."""

import pytest
from pydantic import ValidationError

from posttrain.agent.config import AgentConfig


def test_a_relative_script_path_is_made_absolute_from_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents/mine.py").write_text("print('hi')\n")
    monkeypatch.chdir(tmp_path)
    cfg = AgentConfig(program=["python", "agents/mine.py", "--model", "policy"])
    assert cfg.program == ["python", str(tmp_path / "agents/mine.py"), "--model", "policy"]


def test_an_empty_program_is_refused():
    with pytest.raises(ValidationError, match="must name a command"):
        AgentConfig(program=[])
