"""Ray for the scale tests: skipped with a reason on a machine without it, required in CI;
the local cluster a test module runs on; which metrics vary with timing."""

import pytest


def optional_ray():
    """The ray module, or None where the extra is missing (its tests are marked
    `needs("ray")`, so tests/needs.py deselects them there; CI installs it)."""
    try:
        import ray
    except ImportError:
        return None
    return ray


def local_cluster(**init):
    """A module-scoped autouse fixture: one local Ray for the module (2 CPUs, a 100 MiB object
    store, plus `init`, e.g. resources={"fake_gpu": 2}), shut down after it.
    Use: `ray_cluster = local_cluster(...)` at module level."""
    @pytest.fixture(scope="module", autouse=True)
    def ray_cluster():
        ray = optional_ray()
        ray.init(num_cpus=2, object_store_memory=100 * 2**20, include_dashboard=False,
                 log_to_driver=False, **init)
        yield
        ray.shutdown()
    return ray_cluster


def timing(key: str) -> bool:
    """Metrics that differ between equal runs: durations, idle/busy shares, actor counters."""
    return key.endswith("_s") or "idle" in key or "busy" in key or key.startswith("actor_")
