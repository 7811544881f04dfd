"""Fixtures for the domain suites' tests: validation settings and the weakening helper."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def quick_cfg():
    from posttrain.validate.config import ValidateConfig

    return ValidateConfig(oracle_runs=2, determinism_runs=1)
