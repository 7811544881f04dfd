"""Under CI (CI=true, exported by .ci/run) a skipped test is a failed one, unless ALLOWED
names it with the reason its skip is right even there. A missing Docker engine, openssl,
cgroups, a second core or an extra then cannot hide a test that CI claims to run.
Registered by tests/conftest.py; scripts/ci/skips.py lists what the last CI run skipped."""

import os

import pytest

# Test id, or a prefix of it (a file, a class), -> why it may skip under CI.
# On the CI host (.ci/run: Debian bookworm, root, 2 cores, glibc, openssl, its scripts install
# Docker, Podman, Ray, vLLM, SmolLM2 and every extra) no skip is right but a CPU's own ISA.
ALLOWED: dict[str, str] = {
    "tests/kernels/test_gemv.py": "the decode GEMVs need AVX-512 (bf16: AVX-512-BF16), which the AMD EPYC and "
    "Intel Xeon CI hosts have; on a CPU without them tests/kernels/test_gemv_linear.py checks the GEMM fallback",
}

# The failure text; scripts/ci/skips.py reads the reason after it.
TURNED = "skipped under CI=true (not in tests/ci_skips.py ALLOWED): "


def under_ci() -> bool:
    return os.environ.get("CI") == "true"


def allowed_reason(nodeid: str) -> str | None:
    """ALLOWED's reason for this test id (an exact id or a prefix ending at '::' or '['), or None."""
    for prefix, why in ALLOWED.items():
        if nodeid == prefix or nodeid.startswith((prefix + "::", prefix + "[")):
            return why
    return None


def skip_reason(report) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)   # (path, line, "Skipped: why")
    return text.removeprefix("Skipped: ")


def fail_unallowed_skip(report) -> None:
    """Turn a skip into a failure under CI (an xfail is not a skip; ALLOWED ones stay skips)."""
    if not (report.skipped and under_ci()) or hasattr(report, "wasxfail"):
        return
    allowance = allowed_reason(report.nodeid)
    if allowance is None:
        report.longrepr = TURNED + skip_reason(report)
        report.outcome = "failed"
    elif isinstance(report.longrepr, tuple):    # the allowance shown beside the reason
        path, line, _ = report.longrepr
        report.longrepr = (path, line, f"Skipped: {skip_reason(report)} (allowed under CI: {allowance})")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    fail_unallowed_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    fail_unallowed_skip(report)
    return report
