"""`posttrain rl` keeps intervention points off: rollouts run unattended, with nobody to ask."""

import pytest

from posttrain.errors import ConfigError
from posttrain.recipes.rl.config import load_rl_config


def test_rl_refuses_approval_and_has_it_off_by_default():
    assert load_rl_config(None, []).agent.approval.on is False
    with pytest.raises(ConfigError, match="rl runs unattended"):
        load_rl_config(None, ["agent.approval.on=true"])
    assert load_rl_config(None, ['agent.approval.rules=["^rm "]']).agent.approval.rules == ["^rm "]
