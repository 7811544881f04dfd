"""Fixtures for validation tests."""

import pytest


@pytest.fixture
def quick_cfg():
    from posttrain.validate.config import ValidateConfig

    return ValidateConfig(oracle_runs=3, determinism_runs=2)
