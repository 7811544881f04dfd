"""Test modules need unique basenames: tests/ has no __init__.py files, so pytest imports each
by its basename, and a second module of the same name is a collection error of the whole run."""

from collections import Counter
from pathlib import Path


def test_no_two_test_modules_share_a_basename():
    names = Counter(p.name for p in Path(__file__).parent.rglob("*.py") if p.name != "conftest.py")
    assert [n for n, k in names.items() if k > 1] == []
