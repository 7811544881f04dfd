"""The reward contract of the harness itself (agent/trial.py verify): an agent must not
be able to keep a reward it wrote, whatever it leaves behind in the sandbox."""

import pytest

from posttrain.tasks.suites import terminal_basics
from posttrain.validate import agents
from posttrain.validate.config import ValidateConfig
from posttrain.validate.runs import attempt

# Both probes found real holes (agent processes outliving the agent phase; `rm -rf` failing
# on a write-protected /logs/verifier), fixed in verify() by commit d3f4543.


@pytest.mark.parametrize("probe", agents.HARNESS_PROBES)
def test_harness_probe_cannot_raise_reward(tmp_path, probe):
    task = terminal_basics.generate(tmp_path, 1, seed=0)[0]
    rewards = [attempt(task, ValidateConfig(), script=agents.HACKS[probe](task)).reward
               for _ in range(3)]
    assert rewards == [0.0, 0.0, 0.0]
