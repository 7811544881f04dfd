"""tests/ci_skips.py in real pytest runs (pytester): under CI=true a skip of any kind (in the
test, a skipif mark, a fixture, a whole module) fails unless ALLOWED names it; an xfail stays
an xfail; off CI skips stay skips. scripts/ci/skips.py lists them from the JUnit report."""

import subprocess
import sys
from pathlib import Path

import ci_skips
import pytest

SKIPS_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ci" / "skips.py"

SUITE = """
import pytest

def test_plain_skip():
    pytest.skip("no openssl")

@pytest.mark.skipif(True, reason="needs two cores")
def test_marked_skip():
    pass

@pytest.fixture
def engine():
    pytest.skip("no engine")

def test_fixture_skip(engine):
    pass

@pytest.mark.xfail(reason="a known hole")
def test_expected_failure():
    assert False

def test_passes():
    pass
"""


def run(pytester, *args):
    pytester.makepyfile(test_suite=SUITE)
    return pytester.runpytest("-p", "ci_skips", "-p", "no:cacheprovider", *args)


def test_off_ci_skips_stay_skips(pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    run(pytester).assert_outcomes(skipped=3, xfailed=1, passed=1)


def test_under_ci_every_skip_fails_with_its_reason(pytester, monkeypatch):
    monkeypatch.setenv("CI", "true")
    result = run(pytester)
    result.assert_outcomes(failed=1, errors=2, xfailed=1, passed=1)   # errors: skips in setup
    for why in ("no openssl", "needs two cores", "no engine"):
        result.stdout.fnmatch_lines([f"{ci_skips.TURNED}{why}"])


def test_under_ci_an_allowed_test_or_file_may_skip(pytester, monkeypatch):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setitem(ci_skips.ALLOWED, "test_suite.py::test_plain_skip", "the reason")
    run(pytester).assert_outcomes(skipped=1, failed=0, errors=2, xfailed=1, passed=1)
    monkeypatch.setitem(ci_skips.ALLOWED, "test_suite.py", "the whole file")
    run(pytester).assert_outcomes(skipped=3, xfailed=1, passed=1)


def test_a_prefix_is_a_whole_id_part_never_part_of_a_name():
    ci_skips.ALLOWED.clear()
    ci_skips.ALLOWED["tests/a.py::test_x"] = "why"
    try:
        assert ci_skips.allowed_reason("tests/a.py::test_x[1]") == "why"
        assert ci_skips.allowed_reason("tests/a.py::test_x_other") is None
        assert ci_skips.allowed_reason("tests/a.py") is None
    finally:
        ci_skips.ALLOWED.clear()


def test_under_ci_a_module_level_skip_fails_collection(pytester, monkeypatch):
    monkeypatch.setenv("CI", "true")
    pytester.makepyfile(test_mod='import pytest\npytest.skip("no cad extra", allow_module_level=True)\n')
    result = pytester.runpytest("-p", "ci_skips", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{ci_skips.TURNED}*no cad extra*"])


def test_the_script_lists_each_skip_and_why_from_the_junit_report(pytester, monkeypatch):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setitem(ci_skips.ALLOWED, "test_suite.py::test_marked_skip", "the reason")
    report = pytester.path / "default.xml"
    run(pytester, f"--junitxml={report}")
    r = subprocess.run([sys.executable, SKIPS_SCRIPT, report], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = [line.split() for line in r.stdout.splitlines()[1:]]
    assert [(w[0], w[1]) for w in lines] == [
        ("skip-failed", "test_suite::test_plain_skip:"), ("skipped", "test_suite::test_marked_skip:"),
        ("skip-failed", "test_suite::test_fixture_skip:"), ("xfailed", "test_suite::test_expected_failure:")]
    assert [line.split(": ", 1)[1] for line in r.stdout.splitlines()[1:]] == [
        "no openssl", "needs two cores (allowed under CI: the reason)", "no engine", "a known hole"]


def test_the_script_fails_on_a_missing_report(tmp_path):
    r = subprocess.run([sys.executable, SKIPS_SCRIPT, tmp_path / "slow.xml"], capture_output=True, text=True)
    assert r.returncode == 1 and "slow.xml: missing" in r.stdout


@pytest.mark.parametrize(("command", "cap", "rc"), [("true", 60, 0), ("exit 3", 60, 3), ("sleep 30", 1, 124)])
def test_a_suite_past_its_cap_fails(command, cap, rc):
    """scripts/ci/capped.sh, which .ci/run runs each suite under: past its cap is exit 124
    (a failure, with the reason); any other status is passed on."""
    capped = SKIPS_SCRIPT.parent / "capped.sh"
    r = subprocess.run(["bash", capped, "a suite", str(cap), "bash", "-c", command], capture_output=True, text=True)
    assert r.returncode == rc, r.stdout + r.stderr
    assert "ci: a suite took" in r.stdout
    assert ("hit its 1 s cap: FAILED" in r.stdout) == (rc == 124)
