"""Oracle demonstrations played through a real sandbox: a failing oracle says why."""

import json

from posttrain.agent.config import AgentConfig
from posttrain.agent.demos import play_oracle
from posttrain.tasks import read_task
from posttrain.tasks.suites import terminal_basics


def test_a_failing_oracle_says_why(tmp_path):
    generated, = terminal_basics.generate(tmp_path, 1, seed=0, families=["create-file"])
    task_dir = tmp_path / generated.id
    ok = play_oracle(read_task(task_dir), AgentConfig())
    assert ok.reward == 1 and ok.failure == ""
    (task_dir / "solution" / "steps.json").write_text(json.dumps(["echo wrong; exit 3"]))
    bad = play_oracle(read_task(task_dir), AgentConfig())
    assert bad.reward == 0
    assert bad.failure.startswith("reward 0; the last step's output:")
    assert "wrong" in bad.failure and "[exit 3]" in bad.failure
