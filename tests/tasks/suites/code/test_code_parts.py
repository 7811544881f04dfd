"""The code suite's parts without PyPI: token-level mutations, test removal, the oracle
patch, the verifier's screen, JUnit parsing and reward rules, knob and fetch errors."""

import subprocess
import xml.etree.ElementTree as ET

import pytest

from posttrain.errors import PosttrainError
from posttrain.tasks import suites
from posttrain.tasks.suites.code import files as code_files
from posttrain.tasks.suites.code import grade as code_grade
from posttrain.tasks.suites.code import mutate as code_mutate
from posttrain.tasks.suites.code import pypi
from posttrain.tasks.suites.code import suite as code

SOURCE = '''import itertools


def clip(x, lo=0, hi=10):
    """Clip x into [lo, hi]."""
    if x < lo:   # keep this comment
        return lo
    if x > hi and not lo > hi:
        return hi
    return x + 0


def pairs(seq):
    return list(zip(seq, seq[1:]))
'''


def test_mutations_change_one_token_and_keep_formatting():
    sites = code_mutate.sites(SOURCE)
    kinds = {s.kind for s in sites}
    assert {"comparison", "boolean", "constant", "arithmetic"} <= kinds
    assert all(s.function in ("clip", "pairs") for s in sites)
    # Defaults (lo=0, hi=10) are never mutated.
    assert not any(s.start[0] == 4 for s in sites)
    lt = next(s for s in sites if s.old == " < ")
    out = code_mutate.apply(SOURCE, [lt])
    changed = [(a, b) for a, b in zip(SOURCE.splitlines(), out.splitlines()) if a != b]
    assert changed == [("    if x < lo:   # keep this comment", "    if x <= lo:   # keep this comment")]
    drop_not = next(s for s in sites if s.old == "not ")
    assert "if x > hi and lo > hi:" in code_mutate.apply(SOURCE, [drop_not])


def test_two_mutations_and_a_stub_apply_together_or_not_at_all():
    sites = code_mutate.sites(SOURCE)
    first = [s for s in sites if s.function == "clip"][0]
    second = [s for s in sites if s.function == "pairs"][0]
    both = code_mutate.apply(SOURCE, [first, second])
    assert both.count("\n") == SOURCE.count("\n")
    stub = code_mutate.stub_site(SOURCE, "pairs")
    stubbed = code_mutate.apply(SOURCE, [stub])
    assert 'raise NotImplementedError("pairs")' in stubbed and "zip(" not in stubbed
    assert '"""Clip x into [lo, hi]."""' in code_mutate.apply(SOURCE, [code_mutate.stub_site(SOURCE, "clip")])
    with pytest.raises(ValueError):
        code_mutate.apply(SOURCE, [first, first])


def test_failing_tests_are_removed_and_empty_classes_go():
    tests = ("import x\n\n\ndef test_a():\n    assert 1\n\n\n@mark\ndef test_b():\n    assert 2\n\n\n"
             "class TestC:\n    def test_c(self):\n        pass\n\n\nclass TestD:\n"
             "    def test_d(self):\n        pass\n\n    def test_e(self):\n        pass\n")
    out = code_files.remove_tests(tests, ["m.tests::test_b", "m.tests.TestC::test_c",
                                          "m.tests.TestD::test_d[1]"])
    assert "test_a" in out and "test_b" not in out and "@mark" not in out
    assert "TestC" not in out and "test_d" not in out and "test_e" in out


def test_oracle_patch_applies_with_git(tmp_path):
    bugged = code_mutate.apply(SOURCE, [code_mutate.sites(SOURCE)[0]])
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/m.py").write_text(bugged)
    script = code_files.solve_sh(code_files.patch("pkg/m.py", bugged, SOURCE)).replace(
        "cd /app/repo", f"cd {tmp_path}")
    subprocess.run(["bash", "-c", script], check=True, capture_output=True)
    assert (tmp_path / "pkg/m.py").read_text() == SOURCE


def test_screen_rejects_what_a_fix_never_needs():
    before = code_grade.features(SOURCE)
    fixed = SOURCE.replace("x + 0", "x")
    assert code_grade.screen(fixed, before, []) == []
    hacks = {"import os\n": "new imports", "open('/tmp/r', 'w')\n": "forbidden",
             "__builtins__\n": "forbidden", "x = 'PASSED'\n": "suspect strings",
             "def f(): return sys.modules\n": "forbidden"}
    for line, why in hacks.items():
        reasons = code_grade.screen(fixed + line, before, [])
        assert any(why in r for r in reasons), (line, reasons)
    assert code_grade.screen(fixed + "import heapq\n", before, ["heapq"]) == []
    assert "does not parse" in code_grade.screen("def (", before, [])[0]


def _junit(tmp_path, cases):
    suite = ET.Element("testsuite")
    for name, child in cases:
        case = ET.SubElement(suite, "testcase", classname="pkg.tests.test_m", name=name)
        if child:
            ET.SubElement(case, child)
    path = tmp_path / "r.xml"
    ET.ElementTree(ET.Element("testsuites")).getroot().append(suite)
    path.write_bytes(ET.tostring(suite))
    return str(path)


def test_junit_outcomes_and_rewards_count_skips_as_failures(tmp_path):
    got = code_grade.parse_junit(_junit(tmp_path, [("test_a", None), ("test_b", "skipped"),
                                                   ("test_c", "failure"), ("test_d", "error")]))
    assert got == {"pkg.tests.test_m::test_a": "passed", "pkg.tests.test_m::test_b": "skipped",
                   "pkg.tests.test_m::test_c": "failed", "pkg.tests.test_m::test_d": "error"}
    spec = {"mode": "bugfix", "f2p": ["a", "b"], "p2p": ["c"], "cases": [{"expect": "1"}]}
    ok = {"a": "passed", "b": "passed", "c": "passed"}
    assert code_grade.judge(spec, ok, ["1"])["reward"] == 1.0
    assert code_grade.judge(spec, ok | {"b": "skipped"}, ["1"])["reward"] == 0.0
    assert code_grade.judge(spec, ok | {"c": "skipped"}, ["1"])["reward"] == 0.0
    assert code_grade.judge(spec, ok, ["2"])["reward"] == 0.0        # differential check
    assert code_grade.judge(spec, ok, [])["reward"] == 0.0           # case runner failed
    assert code_grade.judge(spec, {}, ["1"])["reward"] == 0.0        # no report at all
    scratch = spec | {"mode": "scratch", "cases": []}
    assert code_grade.judge(scratch, ok | {"b": "failed"}, [])["reward"] == 0.5
    assert code_grade.judge(scratch, ok | {"c": "failed"}, [])["reward"] == 0.0


def test_normalize_is_order_stable_and_drains_iterators():
    assert code_grade.normalize({3, 1, 2}) == code_grade.normalize({2, 3, 1})
    assert code_grade.normalize(iter([1, 2])) == ["<iter>", ["1", "2"]]
    assert code_grade.normalize((1,)) != code_grade.normalize([1])
    assert code_grade.normalize(object()) == "object"


def test_bad_suite_name_knobs_and_ranges_are_clear_errors(tmp_path):
    with pytest.raises(PosttrainError, match="unknown suite 'nope'; known: .*code"):
        suites.generate("nope", tmp_path, 1, 0)
    with pytest.raises(PosttrainError, match="max_mutations='9' is out of range"):
        code.parse_knobs({"max_mutations": "9"})
    with pytest.raises(PosttrainError, match="unknown knobs"):
        code.parse_knobs({"colour": "red"})
    with pytest.raises(PosttrainError, match="details='loud'"):
        code.parse_knobs({"details": "loud"})
    with pytest.raises(PosttrainError, match="unknown families"):
        suites.generate("terminal-tools", tmp_path, 1, 0, knobs=["families=ftp"])
    assert not any(tmp_path.iterdir())


def test_a_package_that_cannot_be_fetched_writes_nothing(tmp_path, monkeypatch):
    ghost = pypi.Host(pypi.Wheel("toolz", "0.0.0.999", "0" * 64), "toolz", (), {}, "")
    monkeypatch.setitem(pypi.HOSTS, "toolz", ghost)
    out = tmp_path / "out"
    with pytest.raises(PosttrainError, match=r"could not fetch toolz==0\.0\.0\.999 from PyPI"):
        code.generate(out, 2, seed=0, cache=tmp_path / "cache")
    assert not out.exists() or not any(out.iterdir())
