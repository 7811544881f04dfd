"""`posttrain rl` config errors are one line; a task set with no valid tasks is a clear error."""

import subprocess
import sys

import pytest

from posttrain.errors import ConfigError, PosttrainError
from posttrain.recipes.rl import run_rl
from posttrain.recipes.rl_config import load_rl_config


@pytest.mark.parametrize("override, message", [
    ("rollout.stepz=3", "config key rollout.stepz: Extra inputs are not permitted"),
    ("rollout.steps=many", "config key rollout.steps: Input should be a valid integer"),
    ('algo.loss="ppo2"', "unknown loss 'ppo2'"),
    ('algo.tis="tok"', "config key algo.tis"),
    ("rollout.max_staleness=-1", "greater than or equal to 0"),
])
def test_bad_keys_and_types(override, message):
    with pytest.raises(ConfigError, match=message):
        load_rl_config(None, [override])


def test_config_file_errors_are_one_line_through_the_cli(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[rollout]\nsteps = 2\nbogus = true\n")
    r = subprocess.run([sys.executable, "-m", "posttrain.cli", "rl", str(bad)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "rollout.bogus" in r.stderr


def test_defaults_and_example_config_load():
    cfg = load_rl_config("examples/rl.toml")
    assert cfg.rollout.max_staleness == 1 and cfg.algo.tis == "token"
    assert load_rl_config(None).algo.tis == "token"


def test_a_task_dir_without_valid_tasks_is_a_clear_error(tmp_path):
    (tmp_path / "tasks" / "broken").mkdir(parents=True)
    (tmp_path / "tasks" / "broken" / "task.toml").write_text("not toml [")
    cfg = load_rl_config(None, [f'runs_dir="{tmp_path}"', 'tasks.kind="dir"',
                                f'tasks.path="{tmp_path / "tasks"}"', 'policy.init="x"'])
    with pytest.raises(PosttrainError, match="no valid tasks"):
        run_rl(cfg)
