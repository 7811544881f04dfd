"""Fixtures for sandbox tests: a real bubblewrap sandbox per test."""

import pytest

from posttrain.sandbox import SandboxSpec, open_sandbox


@pytest.fixture
def sandbox():
    sb = open_sandbox("bwrap", SandboxSpec())
    yield sb
    sb.close()


@pytest.fixture
def state():
    """A state dir of our own (POSTTRAIN_SANDBOX_DIR), where the sandbox's unprivileged uid can
    reach (not under pytest's 0700 tmp_path); its path in bwrap's argv marks our sandboxes."""
    import shutil
    import tempfile
    from pathlib import Path

    from posttrain.sandbox import hostdir

    d = Path(tempfile.mkdtemp(prefix="posttrain-state-"))
    d.chmod(0o755)
    yield d / "state"
    for root in (d / "state").glob("*"):     # an owner killed mid-creation leaves its tmpfs
        hostdir.remove_root(root, tmpfs=False)
    shutil.rmtree(d, ignore_errors=True)


GENEROUS_S = 60.0    # waits on conditions: a leak or a hang stays forever; load never needs this


@pytest.fixture
def wait_until():
    return wait_until_true


def wait_until_true(condition, what: str, timeout_s: float = GENEROUS_S) -> None:
    """Poll `condition` until it holds; fail naming `what` past a generous deadline."""
    import time

    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout_s:.0f} s: {what}")
        time.sleep(0.02)


@pytest.fixture
def host_pids():
    return host_pids_running


def host_pids_running(marker: str) -> list[int]:
    """Host pids whose command line contains `marker` (to prove a process is dead)."""
    import os

    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


TALLY = {"tried": [], "contained": []}


@pytest.fixture(scope="session")
def hostile_tally():
    return TALLY


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def pytest_terminal_summary(terminalreporter):
    if TALLY["tried"]:
        missed = sorted(set(TALLY["tried"]) - set(TALLY["contained"]))
        terminalreporter.write_line(
            f"hostile-code suite: {len(TALLY['tried'])} attacks tried, "
            f"{len(TALLY['contained'])} contained" + (f"; NOT contained: {missed}" if missed else ""))
