"""Terminal-Bench 1 keystroke solutions and heredoc COPY, converted by the importer."""

import subprocess

import pytest

from posttrain.errors import TaskError
from posttrain.tasks.tb1.fidelity import expand_heredocs, keystrokes


def test_keystrokes_feed_the_program_they_start(tmp_path):
    steps = [{"command": "python3", "append_enter": True},
             {"command": "print(6 * 7)", "append_enter": True},
             {"command": "C-d"}, {"command": "echo never"}]
    stream, turns = keystrokes(steps)
    assert stream == "python3\nprint(6 * 7)\n" and turns is None
    (tmp_path / "k.txt").write_text(stream)
    out = subprocess.run(f"bash < {tmp_path / 'k.txt'}", shell=True, capture_output=True, text=True)
    assert out.stdout == "42\n"


def test_plain_command_lines_are_also_agent_turns():
    stream, turns = keystrokes([{"command": "echo a"}, "echo b", {"command": "Enter"}])
    assert stream == "echo a\necho b\n\n" and turns is None
    assert keystrokes([{"command": "echo a"}, "echo b"])[1] == ["echo a", "echo b"]


def test_heredoc_copy_becomes_a_context_file(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("FROM x\nCOPY <<EOF /app/a.ini\n[s]\nk = 1\nEOF\nRUN true\n")
    expand_heredocs(df)
    assert df.read_text() == "FROM x\nCOPY .posttrain-heredoc-1 /app/a.ini\nRUN true\n"
    assert (tmp_path / ".posttrain-heredoc-1").read_text() == "[s]\nk = 1\n"
    df.write_text("FROM x\nCOPY <<EOF /a\nnever closed\n")
    with pytest.raises(TaskError, match="never closed"):
        expand_heredocs(df)
