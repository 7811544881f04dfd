"""Ray for the scale tests: skipped with a reason on a machine without it, required in CI."""

import os

import pytest


def require_ray():
    if os.environ.get("CI") == "true":  # CI installs it (scripts/ci/ray.sh): never skip there
        import ray
        return ray
    return pytest.importorskip("ray", reason="Ray is an extra: pip install -e '.[ray]'")
