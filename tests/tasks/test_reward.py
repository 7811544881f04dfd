"""The reward contract: reward.json first, else reward.txt; missing or bad is an error."""

import pytest

from posttrain.errors import VerifierError
from posttrain.tasks.reward import parse_reward


def test_txt(tmp_path):
    (tmp_path / "reward.txt").write_text("0.5\n")
    assert parse_reward(tmp_path) == (0.5, {})


def test_json_wins_and_keeps_numeric_metrics(tmp_path):
    (tmp_path / "reward.txt").write_text("0\n")
    (tmp_path / "reward.json").write_text('{"reward": 1, "tests_passed": 3, "note": "x", "ok": true}')
    assert parse_reward(tmp_path) == (1.0, {"tests_passed": 3.0})


def test_json_without_reward_falls_back_to_txt(tmp_path):
    (tmp_path / "reward.txt").write_text("1")
    (tmp_path / "reward.json").write_text('{"accuracy": 0.25}')
    assert parse_reward(tmp_path) == (1.0, {"accuracy": 0.25})


@pytest.mark.parametrize("files, message", [
    ({}, "no reward.txt or reward.json"),
    ({"reward.txt": ""}, "empty reward file"),
    ({"reward.txt": "pass"}, "not a number"),
    ({"reward.txt": "nan"}, "not a finite number"),
    ({"reward.json": "{oops"}, "not valid JSON"),
    ({"reward.json": '{"reward": "1"}'}, "not a finite number"),
])
def test_bad_reward_is_a_verifier_error_not_zero(tmp_path, files, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(VerifierError, match=message):
        parse_reward(tmp_path)
