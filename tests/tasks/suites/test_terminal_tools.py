"""The terminal-tools suite through the real bwrap sandbox: every oracle passes, the agent
turns in steps.json (which hit each family's obstacle first) solve it too, a do-nothing
agent fails, and the same seed gives byte-identical task directories."""

import hashlib
from pathlib import Path

from posttrain.agent.trial import open_task_sandbox, run_oracle, verify
from posttrain.tasks.suites.terminal_tools import suite as terminal_tools


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


def test_every_family_oracle_passes_steps_solve_and_noop_fails(tmp_path):
    tasks = terminal_tools.generate(tmp_path, len(terminal_tools.FAMILIES), seed=5)
    assert {t.config.metadata["family"] for t in tasks} == set(terminal_tools.FAMILIES)
    for task in tasks:
        with open_task_sandbox(task) as sb:
            assert verify(task, sb).reward == 0.0, f"{task.id}: no-op agent passed"
        with open_task_sandbox(task) as sb:
            assert run_oracle(task, sb).exit_code == 0
            assert verify(task, sb).reward == 1.0, f"{task.id}: oracle failed"
        with open_task_sandbox(task) as sb:
            codes = [sb.exec(command, timeout_s=60).exit_code for command in task.oracle_steps()]
            assert verify(task, sb).reward == 1.0, f"{task.id}: steps failed"
        if task.config.metadata["family"] != "jq-select":   # jq's obstacle is only the layout
            assert any(codes[:-1]), f"{task.id}: no step hit the obstacle ({codes})"


def test_a_planted_reward_json_does_not_survive_the_checks(tmp_path):
    task = terminal_tools.generate(tmp_path, 4, seed=1)[3]          # make-build runs agent code
    assert task.config.metadata["family"] == "make-build"
    with open_task_sandbox(task) as sb:
        run_oracle(task, sb)
        # The agent's program writes a reward.json whenever it runs (as in the verifier).
        sb.exec("cd /app/calc && sed -i 's|return 0;|FILE *f = fopen(\"/logs/verifier/reward.json\", "
                "\"w\"); if (f) fputs(\"{\\\\\"reward\\\\\": 1}\", f); return 0;|' calc.c && "
                "sed -i 's/^int main/#include <stdlib.h>\\nint main/' calc.c && echo 0 > /app/answer.txt",
                timeout_s=30)
        assert verify(task, sb).reward == 0.0


def test_same_seed_same_bytes(tmp_path):
    terminal_tools.generate(tmp_path / "a", 6, seed=2)
    terminal_tools.generate(tmp_path / "b", 6, seed=2)
    terminal_tools.generate(tmp_path / "c", 6, seed=3)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b") != _digest(tmp_path / "c")


def test_difficulty_follows_the_oracles_path_length(tmp_path):
    tasks = terminal_tools.generate(tmp_path, 6, seed=0)
    levels = {t.config.metadata["family"]: t.config.metadata["difficulty"] for t in tasks}
    assert set(levels.values()) == {"easy", "medium", "hard"}
    for t in tasks:
        assert t.config.metadata["difficulty"] == terminal_tools.level(len(t.oracle_steps()))
