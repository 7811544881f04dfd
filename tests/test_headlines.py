"""Every headline listed in tests/headlines.toml is quoted in its doc as written and is its
committed JSON's value, rounded as the doc rounds it; the quickstart's README run-time line
quotes the committed summary."""

import json
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEADLINES = tomllib.loads((Path(__file__).with_name("headlines.toml")).read_text())["headline"]


def value_at(data, key: str):
    """The value at a dotted path: "eval_after.pass_at_1", "runs.1403.trainer_idle_frac", "tools.0.wall_s"."""
    for part in key.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


def matches(measured: float, written: float, digits: int) -> bool:
    """`written` is `measured` rounded to `digits` decimals (either way at an exact half)."""
    return abs(measured - written) <= 0.5 * 10 ** -digits + 1e-9


@pytest.mark.parametrize("entry", HEADLINES, ids=lambda e: f"{e['doc']}: {e['quote'][:40]}")
def test_a_headline_is_quoted_and_is_its_json_value(entry):
    assert entry["quote"] in (REPO / entry["doc"]).read_text(), f"not quoted in {entry['doc']}"
    path = REPO / entry["json"]
    assert path.parent == REPO / "bench" / "results" and path.is_file(), f"{path} is not committed"
    data = json.loads(path.read_text())
    for check in entry["checks"]:
        measured = value_at(data, check["key"]) * check.get("scale", 1)
        assert matches(measured, check["value"], check["digits"]), (check, measured)


def test_each_check_names_a_number_of_its_quote():
    """A check's value as written (its digits) is in the quoted text: the table cannot drift."""
    for entry in HEADLINES:
        for check in entry["checks"]:
            written = f"{check['value']:.{check['digits']}f}"
            assert written in entry["quote"], (entry["quote"], written)


def test_the_matcher_rejects_a_wrong_rounding():
    assert matches(0.1845703125, 0.185, 3) and matches(661.8, 662, 0)
    assert not matches(0.1845703125, 0.184, 3) and not matches(661.8, 661, 0)
