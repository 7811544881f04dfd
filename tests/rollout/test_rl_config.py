"""`posttrain rl` config errors are one line; a task set with no valid tasks is a clear error."""

import subprocess
import sys

import pytest

from posttrain.errors import ConfigError, PosttrainError
from posttrain.recipes.rl.run import run_rl
from posttrain.recipes.rl.config import load_rl_config


@pytest.mark.parametrize("override, message", [
    ("rollout.stepz=3", "config key rollout.stepz: Extra inputs are not permitted"),
    ("rollout.steps=many", "config key rollout.steps: Input should be a valid integer"),
    ('algo.loss="ppo2"', "unknown loss 'ppo2'"),
    ('algo.tis="tok"', "config key algo.tis"),
    ("rollout.max_staleness=-1", "greater than or equal to 0"),
    ('agent.otel.endpoint="notaurl"', "config key agent.otel.endpoint: OTLP endpoint 'notaurl' is not an http"),
])
def test_bad_keys_and_types(override, message):
    with pytest.raises(ConfigError, match=message):
        load_rl_config(None, [override])


@pytest.mark.parametrize("overrides, message", [
    (["rollout.engine_process=true"], 'rollout.engine_process is now engines.kind = "process"'),
    (["rollout.pin_cores=false"], "rollout.pin_cores is now engines.pin_cores"),
    (["engines.pin_cores=true"], 'engines.pin_cores is a knob of engines.kind = "process"'),
    (['engines.kind="process"', 'cluster.executor="ray"'],
     'engines.kind = "process" is for cluster.executor = "local"'),
    (['engines.kind="vllm"', 'cluster.executor="ray"'],
     'engines.kind = "vllm" is for cluster.executor = "local"'),
])
def test_the_engine_is_one_key_and_old_keys_say_where_they_went(overrides, message):
    """engines.kind picks the engine; the keys it replaced are refused in one line naming the
    new key, and so are one engine's knob on another and an engine the Ray executor cannot run."""
    with pytest.raises(ConfigError, match=message) as e:
        load_rl_config(None, overrides)
    assert "\n" not in str(e.value)
    cfg = load_rl_config(None, ['engines.kind="process"', "engines.pin_cores=false"])
    assert cfg.engines.kind == "process" and cfg.engines.pin_cores is False


def test_every_engine_kind_has_one_builder():
    from typing import get_args

    from posttrain.engine.fleet.config import EnginesConfig
    from posttrain.recipes.rl.engines import ENGINES

    assert set(ENGINES) == set(get_args(EnginesConfig.model_fields["kind"].annotation))


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


def _rl(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "posttrain.cli", "rl", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_a_bare_rl_prints_its_usage_and_exits_2(tmp_path):
    r = _rl(cwd=tmp_path)
    assert r.returncode == 2 and "Usage:" in r.stdout and "--default" in r.stderr, r.stderr
    assert not (tmp_path / "runs").exists()                 # nothing started


def test_runs_dir_that_is_a_file_is_one_line(tmp_path):
    (tmp_path / "afile").write_text("")
    r = _rl("--set", f"runs_dir={str(tmp_path / 'afile')!r}", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.strip().count("\n") == 0, r.stderr
    assert "is a file" in r.stderr


def test_a_model_level_error_names_no_empty_key():
    with pytest.raises(ConfigError) as e:
        load_rl_config(None, ["agent.approval.on=true"])
    assert str(e.value).startswith("agent.approval.on = true: rl runs unattended") and "config key :" not in str(e.value)


def test_a_union_typed_key_is_named_without_the_member_type():
    from pydantic import StrictFloat, StrictInt

    from posttrain.config_base import StrictModel
    from posttrain.recipes.config_io import load_model

    class Timeouts(StrictModel):
        agent_s: StrictFloat | StrictInt = 1.0

    with pytest.raises(ConfigError) as e:
        load_model(Timeouts, None, ['agent_s="slow"'])
    assert str(e.value).startswith("config key agent_s: ") and ".float" not in str(e.value), str(e.value)
