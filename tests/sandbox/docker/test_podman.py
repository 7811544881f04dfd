"""The docker backend on Podman (POSTTRAIN_CONTAINER_CLI=podman, Debian's podman 4.3):
builds cached by content, the same isolation flags, limits that kill, timeouts that kill
every process but leave the container, and nothing left after close. What Podman's defaults
do not contain (the hostile suite under Podman) is listed in docs/sandbox-docker.md. Slow."""

import os
import shutil
import subprocess
import uuid

import pytest

from posttrain.errors import SandboxError
from posttrain.sandbox import SandboxSpec, open_sandbox
from posttrain.sandbox.environment import prepare_environment

pytestmark = pytest.mark.slow
BASE = os.environ.get("POSTTRAIN_DOCKER_IMAGE", "posttrain/bookworm:latest")


def _podman(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def podman(monkeypatch):
    """Podman with the base image, or a skip with the reason (a failure in CI)."""
    why = None
    if shutil.which("podman") is None:
        why = "no podman CLI"
    elif _podman("image", "exists", BASE).returncode != 0:
        why = f"podman has no {BASE}"
    if why:   # a failure under CI=true (tests/ci_skips.py)
        pytest.skip(f"{why}: bash scripts/ci/docker.sh installs podman and imports the base image")
    monkeypatch.setenv("POSTTRAIN_CONTAINER_CLI", "podman")
    yield
    assert _podman("ps", "-aq", "--filter", "label=posttrain.sandbox").stdout.split() == []


def test_build_cache_isolation_and_mounts(tmp_path, podman):
    env = tmp_path / "environment"
    env.mkdir()
    (env / "Dockerfile").write_text(f"FROM {BASE}\nWORKDIR /app\nCOPY d.txt /app/\n"
                                    "RUN echo built > /app/b\n")
    (env / "d.txt").write_text(uuid.uuid4().hex)
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "t.sh").write_text("id -u\n")
    with open_sandbox("docker", SandboxSpec(verifier_user="root")) as sb:
        prepare_environment(env, sb)
        assert not sb.build.cached and sb.cli.endswith("podman")
        r = sb.exec("cat /app/d.txt /app/b; grep -E 'Seccomp:|NoNewPrivs|CapEff' /proc/self/status;"
                    " id -u; getent hosts example.com || echo nonet")
        assert r.stdout.startswith((env / "d.txt").read_text() + "built\n")
        assert "Seccomp:\t2" in r.stdout and "NoNewPrivs:\t1" in r.stdout
        assert "CapEff:\t0000000000000000" in r.stdout and "\n0\n" not in r.stdout
        assert r.stdout.endswith("nonet\n")
        v = sb.exec("bash /tests/t.sh; echo x > /tests/evil", mounts={"/tests": tests})
        assert v.stdout == "0\n" and v.exit_code != 0
    with open_sandbox("docker", SandboxSpec()) as sb:
        prepare_environment(env, sb)
        assert sb.build.cached and "Read-only" in sb.exec("touch /etc/x").stderr


def test_limits_and_timeouts_kill_inside_only(podman, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)              # Podman's conmon wrote an `oom` file in our cwd
    with open_sandbox("docker", SandboxSpec(memory_mb=128, pids=64)) as sb:
        mem = sb.exec("python3 -c 'a=[]\nwhile True: a.append(b\"x\" * 10**7)'", timeout_s=30)
        assert mem.exit_code != 0 and mem.killed_by == "memory"
        bomb = sb.exec("for i in $(seq 200); do sleep 30 & done; wait", timeout_s=30)
        assert bomb.killed_by == "pids"
        slow = sb.exec("sleep 1000 & sleep 1000", timeout_s=2)
        assert slow.timed_out and slow.killed_by == "timeout"
        assert sb.exec("ps -e -o args= | grep -c '^sleep 1000' || true").stdout == "0\n"
        assert sb.exec("echo alive").stdout == "alive\n"          # the container stayed
    assert list(tmp_path.iterdir()) == []    # nothing written outside the sandbox's dir


def test_compose_under_podman_is_one_clear_error(tmp_path, podman):
    env = tmp_path / "environment"
    env.mkdir()
    (env / "docker-compose.yaml").write_text("services:\n  api:\n    image: x\n")
    with open_sandbox("docker", SandboxSpec()) as sb, pytest.raises(SandboxError) as e:
        prepare_environment(env, sb)
    assert "need the Docker engine" in str(e.value) and "\n" not in str(e.value)


def test_hostile_survivors_earn_nothing(tmp_path, podman):
    """The hostile-survivor suite (tests/sandbox/test_survivors.py) on Podman."""
    from posttrain.validate import survivors

    results = survivors.suite(tmp_path, "podman")
    assert results.pop("legit_server")["reward"] == 1.0
    assert {name: r["reward"] for name, r in results.items()} == dict.fromkeys(survivors.ATTACKS, 0.0)
