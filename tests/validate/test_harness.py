"""The reward contract of the harness itself (agent/trial.py verify): an agent must not
be able to keep a reward it wrote, whatever it leaves behind in the sandbox."""

import pytest

from posttrain.tasks.suites import terminal_basics
from posttrain.validate import agents
from posttrain.validate.config import ValidateConfig
from posttrain.validate.runs import attempt

HOLE = ("agent/trial.py verify(): agent processes outlive the agent phase and "
        "`rm -rf /logs/verifier` fails on a write-protected dir, so the old reward stays")


@pytest.mark.xfail(reason=HOLE, strict=False)
@pytest.mark.parametrize("probe", agents.HARNESS_PROBES)
def test_harness_probe_cannot_raise_reward(tmp_path, probe):
    task = terminal_basics.generate(tmp_path, 1, seed=0)[0]
    rewards = [attempt(task, ValidateConfig(), script=agents.HACKS[probe](task)).reward
               for _ in range(3)]
    assert rewards == [0.0, 0.0, 0.0]
