"""Every headline listed in tests/headlines.toml is quoted in its doc as written and is its
committed JSON's value, rounded as the doc rounds it, at the position in the quote its check
states (the column of a table row), not merely somewhere in the line."""

import json
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEADLINES = tomllib.loads((Path(__file__).with_name("headlines.toml")).read_text())["headline"]
# A number as the docs write one: "+0.185", "662", "1.96e-3"; not the 2 of "SmolLM2" or "x4".
NUMBER = re.compile(r"(?<![\w.])[+-]?\d+(?:\.\d+)?(?:e[+-]?\d+)?")


def value_at(data, key: str):
    """The value at a dotted path: "eval_after.pass_at_1", "runs.1403.trainer_idle_frac", "tools.0.wall_s"."""
    for part in key.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


def matches(measured: float, written: float, digits: int) -> bool:
    """`written` is `measured` rounded to `digits` decimals (either way at an exact half)."""
    return abs(measured - written) <= 0.5 * 10 ** -digits + 1e-9


def numbers_in(quote: str) -> list[str]:
    """The numbers of a quote, left to right, a leading "+" dropped: a check's `at` indexes this."""
    return [m.group().removeprefix("+") for m in NUMBER.finditer(quote)]


def written_at(quote: str, check: dict) -> bool:
    """The number at the check's position is its value as written: its digits, and where the doc
    writes an exponent ("1.96e-3"), one that is the check's scale (1000)."""
    numbers = numbers_in(quote)
    if not 0 <= check["at"] < len(numbers):
        return False
    mantissa, _, exponent = numbers[check["at"]].partition("e")
    if exponent and 10.0 ** -int(exponent) != check.get("scale", 1):
        return False
    return mantissa == f"{check['value']:.{check['digits']}f}"


@pytest.mark.parametrize("entry", HEADLINES, ids=lambda e: f"{e['doc']}: {e['quote'][:40]}")
def test_a_headline_is_quoted_and_is_its_json_value(entry):
    assert entry["quote"] in (REPO / entry["doc"]).read_text(), f"not quoted in {entry['doc']}"
    path = REPO / entry["json"]
    assert path.parent == REPO / "bench" / "results" and path.is_file(), f"{path} is not committed"
    data = json.loads(path.read_text())
    for check in entry["checks"]:
        measured = value_at(data, check["key"]) * check.get("scale", 1)
        assert matches(measured, check["value"], check["digits"]), (check, measured)


def test_each_check_names_the_number_at_its_position():
    """A check's value as written (its digits) is the quote's number at `at`: the same number
    elsewhere in the line (another column, or inside a longer number) does not count."""
    for entry in HEADLINES:
        for check in entry["checks"]:
            assert written_at(entry["quote"], check), (entry["quote"], numbers_in(entry["quote"]), check)


def test_the_position_matcher_rejects_a_number_elsewhere_in_the_line():
    row = "| 0 | 0.091 [0.066, 0.115] | 0.171 [0.137, 0.205] | +0.080 [+0.045, +0.125], p = 9.4e-06 |"
    assert numbers_in(row)[:3] == ["0", "0.091", "0.066"] and numbers_in(row)[-1] == "9.4e-06"
    assert written_at(row, {"value": 0.125, "digits": 3, "at": 9})
    # 0.115 is in the line (the before column's CI), not where the paired CI's top is
    assert not written_at(row, {"value": 0.115, "digits": 3, "at": 9})
    assert not written_at(row, {"value": 0.12, "digits": 2, "at": 9})  # a prefix of 0.125
    assert not written_at(row, {"value": 0.115, "digits": 3, "at": 12})
    moe = "| bf16 | off | 1.05% | 1.96e-3 | 4.51e-2 |"
    assert written_at(moe, {"value": 1.96, "digits": 2, "scale": 1000, "at": 1})
    assert not written_at(moe, {"value": 4.51, "digits": 2, "scale": 1000, "at": 2})
    assert numbers_in("SmolLM2 at x4: 2 s, 14:03") == ["2", "14", "03"]


def test_the_matcher_rejects_a_wrong_rounding():
    assert matches(0.1845703125, 0.185, 3) and matches(661.8, 662, 0)
    assert not matches(0.1845703125, 0.184, 3) and not matches(661.8, 661, 0)
