"""The finance verifier (shipped as tests/score.py; stdlib only): one number and a unit.

The answer file must hold exactly one non-empty line: a number (ASCII digits, an
optional leading minus or accounting parentheses, optional thousands commas, an
optional decimal part) and the unit the question asked for. Reward 1 iff the unit
is that unit, the sign matches and |answer - exact| <= the stated tolerance; else
0. Nothing is ever evaluated: the number is parsed by a regular expression and
float(). Scale words ("1.2 billion"), other units and extra numbers are refused.
"""

import json
import math
import os
import re
import stat
import sys

UNITS = {"usd millions": "USD millions", "%": "%", "percent": "%", "x": "x", "times": "x"}
NUMBER = r"(?P<neg>-)?(?P<open>\()?(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?(?P<close>\))?"
LINE_RE = re.compile(r"^\s*\$?" + NUMBER + r"\s*(?P<unit>[A-Za-z% ]+?)\s*$")


def parse(text):
    """(value, unit) from the answer text, or (None, reason)."""
    lines = [ln for ln in text.replace("\u2212", "-").splitlines() if ln.strip()]
    if len(lines) != 1:
        return None, f"expected one non-empty line, got {len(lines)}"
    m = LINE_RE.match(lines[0])
    if not m:
        return None, "not '<number> <unit>'"
    if bool(m["open"]) != bool(m["close"]) or (m["open"] and m["neg"]):
        return None, "unbalanced parentheses"
    unit = UNITS.get(" ".join(m["unit"].lower().split()))
    if unit is None:
        return None, f"unknown unit {m['unit']!r}"
    value = float(m["int"].replace(",", "") + (m["frac"] or ""))
    return (-value if (m["neg"] or m["open"]) else value), unit


def score(text, expected):
    """{'reward': 0 or 1, ...metrics} for answer text against expected."""
    value, unit = parse(text)
    if value is None:
        return {"reward": 0.0, "parsed": 0.0}
    want = expected["value"]
    err = abs(value - want)
    ok = (unit == expected["unit"] and (value < 0) == (want < 0) and math.isfinite(value)
          and err <= expected["tolerance"])
    return {"reward": 1.0 if ok else 0.0, "parsed": 1.0, "unit_ok": float(unit == expected["unit"]),
            "abs_error": err if math.isfinite(err) else 1e300}


def read_answer(path):
    """The first 100 kB of a regular file (a FIFO or device would hang or never end)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return ""
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(100_000)
    except OSError:
        return ""


def main():
    expected = json.load(open("/tests/expected.json"))
    text = read_answer(expected.get("answer_path", "/app/answer.txt"))
    result = score(text, expected)
    json.dump(result, open("/logs/verifier/reward.json", "w"))
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
