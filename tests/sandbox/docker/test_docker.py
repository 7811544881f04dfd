"""The docker backend through a real engine: image builds (cache, log, timeout, failures,
missing bases), the container's isolation flags, mounts and users. Bad input gives one
clear line and leaves nothing running. Engine tests are slow-marked (`docker_engine`)."""

import os
import re
import subprocess
import uuid

import pytest

from posttrain.errors import SandboxError
from posttrain.sandbox import SandboxSpec, open_sandbox
from posttrain.sandbox.docker.cli import ENGINES, ContainerCLI
from posttrain.sandbox.environment import prepare_environment

BASE = os.environ.get("POSTTRAIN_DOCKER_IMAGE", "posttrain/bookworm:latest")


def _leftovers() -> list[str]:
    """Containers still there: ours (labelled) or a killed build's intermediate ones."""
    out = subprocess.run(["docker", "ps", "-aq"], capture_output=True, text=True).stdout
    return out.split()


def _env(tmp_path, dockerfile: str, **files):
    env = tmp_path / "environment"
    env.mkdir()
    (env / "Dockerfile").write_text(dockerfile)
    for name, text in files.items():
        (env / name).write_text(text)
    return env


def test_engine_not_running_is_one_clear_line(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxError) as e:
        open_sandbox("docker", SandboxSpec())
    msg = str(e.value)
    assert "\n" not in msg and ("not running" in msg or "no `docker` CLI" in msg)


def test_podman_is_a_backend_name_and_engines_differ_by_their_row(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))                 # no engine CLI anywhere
    with pytest.raises(SandboxError, match="no `podman` CLI on PATH"):
        open_sandbox("podman")
    monkeypatch.setenv("POSTTRAIN_CONTAINER_CLI", "nope")    # the older way to pick an engine
    with pytest.raises(SandboxError, match="unknown container engine 'nope'.*podman"):
        open_sandbox("docker")
    docker, podman = (ContainerCLI(name, f"/x/{name}", **row) for name, row in ENGINES.items())
    assert docker.supports_compose and not podman.supports_compose
    assert docker.run_flags() == [] and podman.run_flags()[::2] == ["--ulimit", "--ulimit"]


@pytest.mark.slow
def test_build_is_cached_by_content_and_seeds_app(tmp_path, docker_engine):
    env = _env(tmp_path, f"FROM {BASE}\nWORKDIR /app\nCOPY data.txt /app/\nRUN echo built > /app/b\n",
               **{"data.txt": f"{uuid.uuid4().hex}\n"})
    with open_sandbox("docker", SandboxSpec()) as sb:
        prepare_environment(env, sb)
        first = sb.build
        r = sb.exec("cat /app/data.txt /app/b; touch /etc/x", timeout_s=20)
        data = (env / "data.txt").read_text()
        assert r.stdout == f"{data}built\n" and "Read-only" in r.stderr
    assert not first.cached and first.log.is_file() and "Step" in first.log.read_text()
    with open_sandbox("docker", SandboxSpec()) as sb:
        prepare_environment(env, sb)
        assert sb.build.cached and sb.build.image == first.image
    assert _leftovers() == []


@pytest.mark.slow
def test_a_retagged_base_rebuilds(tmp_path, docker_engine):
    """The cache key holds the base's image id: a tag moved to another image rebuilds."""
    tag = f"posttrain-test-base-{uuid.uuid4().hex[:8]}:1"
    (tmp_path / "other").mkdir()
    other = _env(tmp_path / "other", f"FROM {BASE}\nRUN echo other > /base-was\n")
    env = _env(tmp_path, f"FROM {tag}\nRUN cat /base-was 2>/dev/null || echo first > /base-was\n")
    subprocess.run(["docker", "tag", BASE, tag], check=True)
    try:
        with open_sandbox("docker", SandboxSpec()) as sb:
            prepare_environment(env, sb)
            first = sb.build
            assert sb.exec("cat /base-was").stdout == "first\n"
        with open_sandbox("docker", SandboxSpec()) as sb:
            prepare_environment(other, sb)
            subprocess.run(["docker", "tag", sb.build.image, tag], check=True)
        with open_sandbox("docker", SandboxSpec()) as sb:
            prepare_environment(env, sb)
            assert not sb.build.cached and sb.build.image != first.image
            assert sb.exec("cat /base-was").stdout == "other\n"
    finally:
        subprocess.run(["docker", "rmi", tag], capture_output=True)
    assert _leftovers() == []


@pytest.mark.slow
def test_isolation_flags_and_mounts(tmp_path, docker_engine):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "t.sh").write_text("echo verifier; id -u\n")
    with open_sandbox("docker", SandboxSpec(verifier_user="root")) as sb:
        r = sb.exec("grep -E 'Seccomp:|NoNewPrivs|CapEff' /proc/self/status; id -u; ls /tests")
        assert "Seccomp:\t2" in r.stdout and "NoNewPrivs:\t1" in r.stdout
        assert "CapEff:\t0000000000000000" in r.stdout and r.stdout.split()[-1] != "0"
        v = sb.exec("bash /tests/t.sh; echo x > /tests/evil", mounts={"/tests": tests})
        assert v.stdout == "verifier\n0\n" and v.exit_code != 0      # root, read-only /tests
        assert sb.exec("ls /tests").stdout == ""                      # only for that command
        assert sb.exec("getent hosts example.com || echo nonet").stdout == "nonet\n"


@pytest.mark.slow
@pytest.mark.parametrize("pass_proxy", ["0", "1"])
def test_failing_build_names_the_step_and_keeps_the_log(tmp_path, docker_engine, monkeypatch,
                                                        pass_proxy):
    """The step named is the user's RUN line, whether or not the CA bundle's steps were added."""
    monkeypatch.setenv("POSTTRAIN_DOCKER_PASS_PROXY", pass_proxy)
    env = _env(tmp_path, f"FROM {BASE}\nRUN echo about to fail && exit 3\n")
    with pytest.raises(SandboxError) as e, open_sandbox("docker", SandboxSpec()) as sb:
        prepare_environment(env, sb)
    msg = str(e.value)
    assert "\n" not in msg and re.search(r"Step \d+/\d+ : RUN echo about to fail", msg)
    assert "returned a non-zero code: 3" in msg and "build log:" in msg
    assert "about to fail" in e.value.log_tail
    assert _leftovers() == []


@pytest.mark.slow
def test_build_past_its_timeout_is_stopped(tmp_path, docker_engine):
    env = _env(tmp_path, f"FROM {BASE}\nRUN sleep 120\n")
    with pytest.raises(SandboxError) as e, \
            open_sandbox("docker", SandboxSpec(build_timeout_s=3)) as sb:
        prepare_environment(env, sb)
    assert "exceeded its build timeout (3 s" in str(e.value)
    assert _leftovers() == []


@pytest.mark.slow
def test_missing_base_image_names_it_and_both_remedies(tmp_path, docker_engine):
    env = _env(tmp_path, "FROM registry.invalid/no-such/image:1\nRUN true\n")
    with pytest.raises(SandboxError) as e, open_sandbox("docker", SandboxSpec()) as sb:
        prepare_environment(env, sb)
    msg = str(e.value)
    assert "base image registry.invalid/no-such/image:1 is not present" in msg
    assert "docker load" in msg and "POSTTRAIN_DOCKER_BASE_MAP" in msg and "\n" not in msg


@pytest.mark.slow
def test_base_map_serves_from_a_local_image(tmp_path, docker_engine, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_DOCKER_BASE_MAP", f"example.org/tb/base={BASE}")
    env = _env(tmp_path, "FROM example.org/tb/base:2025\nRUN echo mapped > /m\n")
    with open_sandbox("docker", SandboxSpec()) as sb:
        prepare_environment(env, sb)
        assert sb.exec("cat /m").stdout == "mapped\n"


@pytest.mark.slow
def test_root_agent_may_install_but_keeps_no_capabilities_beyond_the_few(docker_engine):
    with open_sandbox("docker", SandboxSpec(user="root")) as sb:
        r = sb.exec("id -u; touch /usr/local/bin/x && echo wrote; kill -9 -1; sleep 0.2")
        assert r.stdout.startswith("0\nwrote\n")
        assert sb.exec("echo alive").stdout == "alive\n"      # init restarted if it died
        assert sb.exec("mount -t tmpfs none /mnt 2>&1 || echo denied").stdout.endswith("denied\n")
