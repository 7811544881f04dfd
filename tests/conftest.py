"""Fixtures for every test."""

import pytest
import torch

# ci_skips: under CI=true a skip fails unless its ALLOWED list names it; needs: tests that need
# an extra or a set-up step the bare install lacks are deselected there; pytester: their tests.
pytest_plugins = ("ci_skips", "needs", "pytester")


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: tiny matmuls on a busy 2-core machine stall at thread barriers."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _docker_engine_error() -> str | None:
    from posttrain.errors import SandboxError
    from posttrain.sandbox.docker.cli import engine_cli

    try:
        engine_cli()
    except SandboxError as e:
        return str(e)
    return None


@pytest.fixture(scope="session")
def docker_engine():
    """A running Docker engine, or a skip with the reason (a failure in CI, where
    scripts/ci/docker.sh must have started one: tests/ci_skips.py)."""
    why = _docker_engine_error()
    if why is None:
        return "docker"
    pytest.skip(f"no Docker engine (bash scripts/ci/docker.sh starts one): {why}")


@pytest.fixture(scope="session")
def docker_task_env(docker_engine):
    """Builds of the docker test tasks: the TB base image served by the local Debian
    image, the host CA bundle passed in (for `RUN pip install` behind the proxy)."""
    import os

    from tb1_docker_tasks import TB_BASE

    base = os.environ.get("POSTTRAIN_DOCKER_IMAGE", "posttrain/bookworm:latest")
    env = {"POSTTRAIN_DOCKER_BASE_MAP": f"{TB_BASE}={base}", "POSTTRAIN_DOCKER_PASS_PROXY": "1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield env
    for k, v in saved.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


@pytest.fixture(scope="session")
def docker_tb1_tasks(tmp_path_factory, docker_task_env):
    """Three sound TB1-layout docker tasks, imported as Harbor task dirs."""
    from tb1_docker_tasks import SOUND, write_suite

    from posttrain.tasks.tb1.importer import import_tb1

    root = tmp_path_factory.mktemp("docker-tasks")
    write_suite(root / "tb1", {k: SOUND[k] for k in ("csv-total", "jq-active-users", "no-run-bit")})
    import_tb1(root / "tb1", root / "tasks")
    return root / "tasks"
