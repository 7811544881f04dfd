"""Quota bookkeeping: defaults, validation, what stopped a command, and the rlimit fallback
used where the host gives us no cgroups and no mount (as for an unprivileged user)."""

import pytest

from posttrain.errors import SandboxError
from posttrain.sandbox import SandboxSpec, hostdir, open_sandbox
from posttrain.sandbox.bwrap import sandbox as bwrap_module
from posttrain.sandbox.bwrap.limits import Limits, killed_by


def test_defaults_and_validation():
    limits = Limits.of(SandboxSpec())
    assert (limits.memory_mb, limits.pids, limits.disk_mb) == (2048, 512, 2048)
    with pytest.raises(SandboxError, match="pids must be positive"):
        Limits.of(SandboxSpec(pids=0))


@pytest.mark.parametrize("timed_out, output, before, after, code, expected", [
    (False, False, {"oom_kill": 0, "pids_max": 0}, {"oom_kill": 1, "pids_max": 0}, 137, "memory"),
    (True, False, {"oom_kill": 0, "pids_max": 0}, {"oom_kill": 0, "pids_max": 3}, 137, "pids"),
    (True, False, {"oom_kill": 0, "pids_max": 0}, {"oom_kill": 0, "pids_max": 0}, 137, "timeout"),
    (False, True, None, None, 137, "output"),
    (False, False, {"oom_kill": 0, "pids_max": 0}, {"oom_kill": 0, "pids_max": 2}, 1, "pids"),
    (False, False, None, None, 0, "none"),
])
def test_killed_by(timed_out, output, before, after, code, expected):
    assert killed_by(timed_out, output, before, after, code) == expected


@pytest.fixture
def no_cgroups_no_mount(monkeypatch):
    monkeypatch.setattr(bwrap_module.Cgroup, "open", classmethod(lambda cls, *a: None))
    monkeypatch.setattr(hostdir, "_mount_tmpfs", lambda *a: False)


def test_rlimit_fallback(no_cgroups_no_mount):
    spec = SandboxSpec(memory_mb=200, pids=50, disk_mb=5)
    with open_sandbox("bwrap", spec) as sb:
        assert sb.cgroup is None
        assert sb.enforcement["memory"].startswith("rlimit-as")
        assert sb.enforcement["disk"].startswith("rlimit-fsize")
        r = sb.exec("ulimit -v; ulimit -u; ulimit -f")
        assert r.stdout.split() == [str(200 * 1024), "50", str(5 * 1024)]
        r = sb.exec("head -c 10M /dev/zero > /app/big")
        assert r.exit_code != 0 and sb.host_path("/app/big").stat().st_size <= 5 * 1024 * 1024
        r = sb.exec("python3 -c 'x = bytearray(400 * 1024 * 1024)'")
        assert r.exit_code != 0 and "MemoryError" in r.stderr
