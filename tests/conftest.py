"""Fixtures for every test."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread: tiny matmuls on a busy 2-core machine stall at thread barriers."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _docker_engine_error() -> str | None:
    from posttrain.errors import SandboxError
    from posttrain.sandbox.docker_engine import engine_cli

    try:
        engine_cli()
    except SandboxError as e:
        return str(e)
    return None


@pytest.fixture(scope="session")
def docker_engine():
    """A running Docker engine, or a skip with the reason (a failure in CI, where
    scripts/ci/docker.sh must have started one)."""
    import os

    why = _docker_engine_error()
    if why is None:
        return "docker"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but no Docker engine: {why}")
    pytest.skip(f"no Docker engine (bash scripts/ci/docker.sh starts one): {why}")
