"""The longctx verifier (shipped as tests/score.py; stdlib only): set answers by F1.

The answer file lists items, one per line. Items are compared after lower-casing,
collapsing spaces and stripping surrounding punctuation; duplicates count once.
Reward = F1 of the listed set against the expected set, and 0 when more than twice
as many items are listed as the answer has (so listing every candidate earns
nothing, unlike substring scoring).
"""

import json
import os
import stat
import sys

PUNCT = " \t.,;:!?\"'`()[]{}"


def normalize(item):
    return " ".join(item.strip(PUNCT).lower().split())


def score(text, expected):
    want = {normalize(x) for x in expected["items"]}
    got = {normalize(x) for x in text.splitlines()} - {""}
    if not got or len(got) > 2 * len(want):
        return {"reward": 0.0, "listed": float(len(got))}
    hit = len(got & want)
    if hit == 0:
        return {"reward": 0.0, "listed": float(len(got))}
    p, r = hit / len(got), hit / len(want)
    return {"reward": 2 * p * r / (p + r), "precision": p, "recall": r, "listed": float(len(got))}


def read_answer(path):
    """The first 1 MB of a regular file (a FIFO or device would hang or never end)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return ""
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(1_000_000)
    except OSError:
        return ""


def main():
    expected = json.load(open("/tests/expected.json"))
    result = score(read_answer(expected.get("answer_path", "/app/answer.txt")), expected)
    json.dump(result, open("/logs/verifier/reward.json", "w"))
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
