"""The verifier output contract, through real verifier scripts in real bwrap sandboxes: the
reward must parse, be finite and lie in the task's declared range. Anything else is an
error naming the value: `validate` marks the task broken; verify() (what `eval` and `rl`
call) returns a verifier_error, never a reward."""

import pytest

from posttrain.agent.trial import open_task_sandbox, run_oracle, verify
from posttrain.tasks import read_task
from posttrain.validate.checks import oracle
from posttrain.validate.config import ValidateConfig
from posttrain.validate.runner import validate_dirs

from defective import base

CFG = ValidateConfig(oracle_runs=1, determinism_runs=1)


def _task_writing(root, name: str, line: str, toml_extra: str = ""):
    """The good fixture task, with a verifier whose last step is `line`."""
    files = base() | {"task.toml": base()["task.toml"] + toml_extra,
                      "tests/test.sh": f"#!/bin/bash\nmkdir -p /logs/verifier\n{line}\n"}
    for rel, text in files.items():
        p = root / name / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        p.chmod(0o755)
    return root / name


BAD = [  # (case, verifier line, what the error must show)
    ("non-number", "echo yes > /logs/verifier/reward.txt", "'yes'"),
    ("nan", "echo nan > /logs/verifier/reward.txt", "nan"),
    ("nan-json", "echo '{\"reward\": NaN}' > /logs/verifier/reward.json", "nan"),
    ("negative", "echo -0.5 > /logs/verifier/reward.txt", "-0.5"),
    ("above-range", "echo 1.5 > /logs/verifier/reward.txt", "1.5"),
    ("missing", "false && echo 1 > /logs/verifier/reward.txt", "no reward.txt or reward.json"),
]


@pytest.mark.parametrize("case, line, shown", BAD, ids=[b[0] for b in BAD])
def test_bad_reward_is_an_error_with_its_value(tmp_path, case, line, shown):
    task_dir = _task_writing(tmp_path / "tasks", case, line)
    task = read_task(task_dir)
    with open_task_sandbox(task) as sandbox:        # eval and rl: an error, never a reward
        run_oracle(task, sandbox)
        verdict = verify(task, sandbox)
    assert verdict.status == "verifier_error" and shown in verdict.error
    [report] = validate_dirs([task_dir], CFG, tmp_path / "state")
    assert report.status == "broken"
    assert shown in report.reasons[0] and report.reasons[0].startswith("oracle:")


def test_declared_range_is_the_bound(tmp_path):
    """A task that declares [0, 10] may write 7; above 10 is out of range."""
    extra = "reward_range = [0, 10]\n"
    ok = read_task(_task_writing(tmp_path / "t", "seven", "echo 7 > /logs/verifier/reward.txt",
                                 extra))
    high = read_task(_task_writing(tmp_path / "t", "eleven", "echo 11 > /logs/verifier/reward.txt",
                                   extra))
    assert ok.config.verifier.reward_range == (0.0, 10.0)
    with open_task_sandbox(ok) as sandbox:
        assert (verify(ok, sandbox).status, verify(ok, sandbox).reward) == ("ok", 7.0)
    with open_task_sandbox(high) as sandbox:
        v = verify(high, sandbox)
    assert v.status == "verifier_error" and "reward 11.0 is outside" in v.error and "[0, 10]" in v.error


def test_valid_reward_passes(tmp_path):
    task = read_task(_task_writing(tmp_path / "tasks", "valid",
                                   'echo 1 > /logs/verifier/reward.txt'))
    check = oracle(task, CFG, {})
    assert check.passed and check.evidence["rewards"] == [1.0]
