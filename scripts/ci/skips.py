"""List each test the last CI run skipped, and why, from the JUnit XML reports .ci/run writes.

    python scripts/ci/skips.py                 # .ci/reports/*.xml, the last .ci/run
    python scripts/ci/skips.py report.xml ...  # any pytest --junitxml reports

One line per test: `skipped` (allowed under CI by tests/ci_skips.py ALLOWED), `xfailed`
(an expected failure, not a skip), or `skip-failed` (a skip turned into a failure under CI).
Exits 1 when a report is missing (the suite did not finish writing it)."""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPORTS = Path(__file__).resolve().parents[2] / ".ci" / "reports"
TURNED = "skipped under CI=true (not in tests/ci_skips.py ALLOWED): "   # tests/ci_skips.py's failure text


def test_id(case: ET.Element) -> str:
    cls, name = case.get("classname", ""), case.get("name", "")
    return f"{cls}::{name}" if cls else name


def outcome(case: ET.Element) -> tuple[str, str] | None:
    """(kind, reason) for a skipped, xfailed or skip-failed test case; None for the others."""
    for child in case:
        text = child.text or child.get("message") or ""
        if child.tag == "skipped":
            kind = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
            return kind, child.get("message") or ""
        if child.tag in ("failure", "error") and TURNED in text:
            return "skip-failed", text.split(TURNED, 1)[1].splitlines()[0]
    return None


def skips(report: Path) -> list[tuple[str, str, str]]:
    """(kind, test id, reason) for each such test case in one JUnit XML report."""
    rows = []
    for case in ET.parse(report).getroot().iter("testcase"):
        got = outcome(case)
        if got is not None:
            rows.append((got[0], test_id(case), got[1]))
    return rows


def main(argv: list[str]) -> int:
    reports = [Path(a) for a in argv] or sorted(REPORTS.glob("*.xml"))
    if not reports:
        print(f"no JUnit reports in {REPORTS} (run .ci/run first)")
        return 1
    missing = [r for r in reports if not r.is_file()]
    for report in reports:
        if report in missing:
            print(f"{report}: missing")
            continue
        rows = skips(report)
        print(f"{report}: {len(rows)} skipped, xfailed or skip-failed")
        for kind, test, why in rows:
            print(f"  {kind:<11} {test}: {why}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
