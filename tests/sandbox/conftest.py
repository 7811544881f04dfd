"""Fixtures for sandbox tests: a real bubblewrap sandbox per test."""

import pytest

from posttrain.sandbox import SandboxSpec, open_sandbox


@pytest.fixture
def sandbox():
    sb = open_sandbox("bwrap", SandboxSpec())
    yield sb
    sb.close()


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
