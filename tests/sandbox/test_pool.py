"""The sandbox pool (paired verbs, quotas, warm reuse, leases, health) and the crash reaper."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from posttrain.errors import SandboxError
from posttrain.sandbox import SandboxSpec
from posttrain.sandbox.pool import SandboxPool
from posttrain.sandbox.reaper import reap


def test_quota_paired_verbs():
    with SandboxPool(quotas={"math": 2}) as pool:
        assert pool.can_acquire("math")
        a, b = pool.acquire("math"), pool.acquire("math")
        assert not pool.can_acquire("math") and pool.can_acquire("code")
        with pytest.raises(SandboxError, match="quota"):
            pool.acquire("math")
        pool.release(a)
        assert pool.can_acquire("math")
        pool.release(b)
        with pytest.raises(SandboxError):
            pool.release(b)


def test_warm_sandboxes_are_reset_and_reused():
    with SandboxPool(warm=1) as pool:
        assert pool.health()["idle"] == 1
        sb = pool.acquire()
        sb.spec.env["LEAK"] = "1"
        sb.exec("echo secret > /app/s; sleep 1000 &")
        pool.release(sb)
        again = pool.acquire()
        assert again is sb and pool.stats["reused"] == 2
        r = again.exec("ls -A /app; echo ${LEAK:-none}; pgrep -c sleep || true")
        assert r.stdout.split() == ["none", "0"]
        pool.release(again)
        health = pool.health()
        assert health["idle"] == 1 and health["idle_healthy"]


def test_different_spec_is_not_pooled():
    with SandboxPool(warm=1) as pool:
        sb = pool.acquire(spec=SandboxSpec(memory_mb=256))
        assert sb.spec.memory_mb == 256
        root = sb.host_path("/app").parent
        pool.release(sb)
        assert not root.exists()                 # closed, not kept


def test_max_total():
    with SandboxPool(max_total=1) as pool:
        sb = pool.acquire("a")
        assert not pool.can_acquire("b")
        pool.release(sb)


def test_leases_past_their_time_are_reaped():
    with SandboxPool(lease_s=0.1) as pool:
        sb = pool.acquire("x")
        root = sb.host_path("/app").parent
        time.sleep(0.2)
        pool.reap()
        assert pool.in_use("x") == 0 and not root.exists()


CRASHER = """
import time
from posttrain.sandbox import open_sandbox
sb = open_sandbox()
sb.exec("setsid sleep 543.2109 >/dev/null 2>&1 &")
print(sb.root, flush=True)
time.sleep(120)
"""


def test_reaper_reclaims_after_parent_crash(host_pids, wait_until):
    proc = subprocess.Popen([sys.executable, "-c", CRASHER], stdout=subprocess.PIPE, text=True)
    root = Path(proc.stdout.readline().strip())
    assert root.exists() and host_pids("543.2109")
    os.kill(proc.pid, signal.SIGKILL)                        # a crash: no cleanup ran
    proc.wait()
    wait_until(lambda: host_pids("543.2109") == [], "died with their parent")
    report = reap()
    assert root.name in report.sandboxes and not root.exists()
    assert report.cgroups_removed >= 1 or os.geteuid() != 0


def test_release_without_waiting_recycles_in_background(wait_until):
    with SandboxPool(warm=1) as pool:
        sb = pool.acquire()
        sb.exec("echo x > /app/x")
        pool.release(sb, wait=False)
        assert pool.in_use() == 0 and pool.can_acquire()
        wait_until(lambda: pool.health()["idle"] >= 1, "the released sandbox is reset")
        again = pool.acquire()
        assert again is sb and again.exec("ls -A /app").stdout == ""
        pool.release(again, wait=False)
    assert not sb.root.exists()                              # close() waited for the reset


def test_sixteen_concurrent_sandboxes_without_failure():
    import threading

    results = []
    with SandboxPool(max_total=16, quotas={"d": 16}) as pool:
        def episode():
            sb = pool.acquire("d")
            try:
                results.append([sb.exec(f"echo {i}").stdout for i in range(3)])
            finally:
                pool.release(sb)

        threads = [threading.Thread(target=episode) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results == [["0\n", "1\n", "2\n"]] * 16
