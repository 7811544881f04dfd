"""The reaper and the cgroups of live sandboxes. A reap running while other threads start
sandboxes never removes their groups (it once did, from a list of live sandboxes made
before they existed: their first command was then killed, exit 137, and a task's oracle
failed); the groups it removes are old, empty strays. A bwrap whose groups vanish as it
starts runs in groups made again, never outside them."""

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from posttrain.sandbox import SandboxSpec, open_sandbox
from posttrain.sandbox.bwrap import launch
from posttrain.sandbox.reaper import reap

STRAY, YOUNG = "posttrain-0123456789ab", "posttrain-ba9876543210"


@pytest.fixture
def own_state(state, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_SANDBOX_DIR", str(state))
    with open_sandbox("bwrap", SandboxSpec(warm=False)) as sb:
        if sb.cgroup is None:
            pytest.skip("needs cgroups (root)")
    return state


def _start_and_run(_) -> str:
    with open_sandbox("bwrap") as sb:
        return sb.exec("echo $((6 * 7)) > /app/x && cat /app/x").stdout.strip()


def test_sandboxes_started_during_reaps_keep_their_groups(own_state):
    stop, removed = threading.Event(), []

    def reaping():
        while not stop.is_set():
            removed.append(reap().cgroups_removed)

    reaper = threading.Thread(target=reaping)
    reaper.start()
    try:
        with ThreadPoolExecutor(6) as pool:
            out = list(pool.map(_start_and_run, range(120)))
    finally:
        stop.set()
        reaper.join()
    assert out == ["42"] * 120
    assert len(removed) > 1 and sum(removed) == 0


def test_reap_removes_old_empty_strays_only(own_state):
    with open_sandbox("bwrap", SandboxSpec(warm=False)) as live:
        parents = [d.parent for d in live.cgroup.dirs.values()]
        for parent in parents:
            (parent / STRAY).mkdir()
            os.utime(parent / STRAY, (1, 1))        # left by a run killed long ago
            (parent / YOUNG).mkdir()                # maybe another state dir's, starting
        for d in live.cgroup.dirs.values():
            os.utime(d, (1, 1))                     # a sandbox idle for long: empty, old
        try:
            assert reap().cgroups_removed == len(parents)
            assert not any((p / STRAY).exists() for p in parents)
            assert all((p / YOUNG).is_dir() for p in parents) and live.cgroup.exists()
        finally:
            for parent in parents:
                (parent / YOUNG).rmdir()
        assert live.exec("echo ok").stdout == "ok\n"


def test_groups_removed_as_bwrap_starts_are_made_again(own_state, monkeypatch):
    real_enter = launch._enter_cgroup
    calls = []

    def groups_reaped_meanwhile(ns, cgroup, sync_w):
        if not calls:
            cgroup.remove()                         # what a reaper does to an empty group
        calls.append(cgroup)
        real_enter(ns, cgroup, sync_w)

    with open_sandbox("bwrap", SandboxSpec(warm=False)) as sb:
        monkeypatch.setattr(launch, "_enter_cgroup", groups_reaped_meanwhile)
        r = sb.exec("echo ok; cat /proc/self/cgroup")
        assert len(calls) == 2 and calls[1] is sb.cgroup and sb.cgroup.exists()
        assert r.exit_code == 0 and r.stdout.startswith("ok\n")
        assert f"posttrain-{sb.id}" in r.stdout     # it ran inside the new groups
