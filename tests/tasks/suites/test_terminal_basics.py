"""The generated suite, checked through the real bwrap sandbox: every oracle passes,
a do-nothing agent fails, and tests are invisible during the agent phase."""

from posttrain.agent.trial import open_task_sandbox, run_oracle, verify
from posttrain.tasks import load_tasks
from posttrain.tasks.suites import terminal_basics


def _suite(tmp_path, n=18, seed=3):
    return terminal_basics.generate(tmp_path, n, seed=seed, split="train")


def test_every_oracle_passes_and_noop_fails(tmp_path):
    for task in load_tasks(_suite(tmp_path)[0].path.parent):
        with open_task_sandbox(task) as sb:
            assert verify(task, sb).reward == 0.0, f"{task.id}: no-op agent passed"
        with open_task_sandbox(task) as sb:
            assert run_oracle(task, sb).exit_code == 0
            assert verify(task, sb).reward == 1.0, f"{task.id}: oracle failed"


def test_agent_steps_also_solve_the_task(tmp_path):
    for task in _suite(tmp_path, n=6):
        with open_task_sandbox(task) as sb:
            for command in task.oracle_steps():
                sb.exec(command, timeout_s=10)
            assert verify(task, sb).reward == 1.0


def test_same_seed_same_suite_and_splits_differ(tmp_path):
    a = _suite(tmp_path / "a", n=12, seed=1)
    b = _suite(tmp_path / "b", n=12, seed=1)
    c = terminal_basics.generate(tmp_path / "c", 12, seed=2, split="heldout")
    assert [t.instruction for t in a] == [t.instruction for t in b]
    assert [t.instruction for t in a] != [t.instruction for t in c]
    assert sum(t.config.metadata["multi_turn"] for t in a) == 6


def test_tests_are_not_visible_to_the_agent(tmp_path):
    task = _suite(tmp_path, n=1)[0]
    with open_task_sandbox(task) as sb:
        assert sb.exec("test -e /tests/test.sh", timeout_s=5).exit_code != 0
        assert sb.exec("test -e /solution/solve.sh", timeout_s=5).exit_code != 0


def test_agent_written_reward_does_not_count(tmp_path):
    task = _suite(tmp_path, n=1)[0]
    with open_task_sandbox(task) as sb:
        sb.exec("mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt", timeout_s=5)
        assert verify(task, sb).reward == 0.0


def test_verifier_without_reward_file_is_an_error(tmp_path):
    task = _suite(tmp_path, n=1)[0]
    (task.tests_dir / "test.sh").write_text("#!/bin/bash\nexit 0\n")
    with open_task_sandbox(task) as sb:
        verdict = verify(task, sb)
    assert verdict.status == "verifier_error" and "no reward" in verdict.error
