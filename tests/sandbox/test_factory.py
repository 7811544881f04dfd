"""Backend selection and the unconfined `process` backend."""

import pytest

from posttrain.errors import SandboxError
from posttrain.sandbox import SandboxSpec, open_sandbox


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(SandboxError, match="unknown sandbox backend 'nope'.*bwrap"):
        open_sandbox("nope")


def test_default_backend_is_bwrap():
    with open_sandbox() as sb:
        assert type(sb).__name__ == "BwrapSandbox"


def test_process_backend_runs_in_its_dir(tmp_path):
    with open_sandbox("process", SandboxSpec(env={"X": "1"})) as sb:
        r = sb.exec("echo hi > f; echo $X; pwd")
        assert r.exit_code == 0 and r.stdout.splitlines()[0] == "1"
        assert sb.host_path("/app/f").read_text() == "hi\n"
        assert r.stdout.splitlines()[1] == str(sb.host_path("/app"))
        r = sb.exec("sleep 5", timeout_s=0.2)
        assert r.timed_out and r.killed_by == "timeout"
        with pytest.raises(SandboxError, match="cannot mount"):
            sb.exec("true", mounts={"/tests": tmp_path})
        root = sb.host_path("/app").parent
    assert not root.exists()
