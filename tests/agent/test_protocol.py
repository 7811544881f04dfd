"""The text protocol: well-formed, malformed and unterminated replies."""

import pytest

from posttrain.agent.protocol import Action, format_observation, parse_action, render_action
from posttrain.types import ExecResult


@pytest.mark.parametrize("text, expected", [
    ("<bash>ls /app</bash>", Action("bash", "ls /app")),
    ("  <bash> echo hi > /app/a.txt </bash>\n", Action("bash", "echo hi > /app/a.txt")),
    ("<bash>printf 'a\nb'</bash>", Action("bash", "printf 'a\nb'")),
    ("<submit/>", Action("submit")),
    (" <submit/> ", Action("submit")),
])
def test_well_formed(text, expected):
    assert parse_action(text) == expected


@pytest.mark.parametrize("text", [
    "", "ls /app", "<bash>ls", "ls</bash>", "<bash></bash>", "<bash>  </bash>",
    "<bash>ls</bash><bash>pwd</bash>", "<bash>ls</bash> then <submit/>", "<submit/><submit/>",
    "<bash>a<bash>b</bash>",
])
def test_malformed(text):
    assert parse_action(text).kind == "malformed"


def test_unterminated_wins_over_content():
    assert parse_action("<bash>ls</bash>", terminated=False).kind == "unterminated"


def test_render_round_trips():
    for a in (Action("bash", "cat /app/x"), Action("submit")):
        assert parse_action(render_action(a)) == a


def test_observation_budget_and_status():
    r = ExecResult(exit_code=3, stdout="x" * 100, stderr="boom", duration_s=0.1)
    obs = format_observation(r, budget=10)
    assert obs.startswith("x" * 10) and "94 more characters" in obs and "[exit 3]" in obs
    empty = ExecResult(exit_code=0, stdout="", stderr="", duration_s=0.0)
    assert format_observation(empty) == "(no output)"
    timed = ExecResult(exit_code=-9, stdout="", stderr="", duration_s=1, timed_out=True)
    assert "timed out" in format_observation(timed)
