"""rollout.length_curriculum (rollout/length.py): the reply and context budgets rise with the
policy version, under the configured budgets, and a `posttrain rl` run samples under them."""

import json

import pytest

from posttrain.agent.config import AgentConfig
from posttrain.errors import ConfigError
from posttrain.recipes.rl.run import run_rl
from posttrain.recipes.rl.config import load_rl_config
from posttrain.rollout.envs import SandboxEnv
from posttrain.rollout.length import LengthStage, budgets_at, check_curriculum

STAGES = [LengthStage(from_step=2, max_reply_tokens=8, max_context=256),
          LengthStage(from_step=5, max_reply_tokens=16)]


@pytest.mark.parametrize("version, budgets", [(0, (40, 2048)), (2, (8, 256)), (4, (8, 256)), (9, (16, 2048))])
def test_each_version_samples_under_its_stage(version, budgets):
    assert budgets_at(STAGES, version, 40, 2048) == budgets


def test_a_stage_never_lifts_a_budget_above_the_configured_one():
    assert budgets_at([LengthStage(from_step=0, max_reply_tokens=99)], 0, 40, 2048) == (40, 2048)


@pytest.mark.parametrize("stages, message", [
    ([LengthStage(from_step=3), LengthStage(from_step=3)], "must come after"),
    ([LengthStage(from_step=0, max_reply_tokens=8), LengthStage(from_step=1, max_reply_tokens=4)], "falls from 8 to 4")])
def test_a_curriculum_that_does_not_rise_is_refused(stages, message):
    with pytest.raises(ValueError, match=message):
        check_curriculum(stages)


def test_a_stage_above_the_configured_budget_is_a_config_error():
    with pytest.raises(ConfigError, match="above agent.max_reply_tokens = 40"):
        load_rl_config(None, ["rollout.length_curriculum=[{from_step=0, max_reply_tokens=64}]"])


def test_the_sandbox_env_gives_the_agent_the_stage_budgets():
    env = SandboxEnv([], framer=None, agent=AgentConfig(), group_size=2, lengths=STAGES)
    assert env._agent_at(0) is env.agent
    assert (env._agent_at(3).max_reply_tokens, env._agent_at(3).max_context) == (8, 256)


def test_an_rl_run_raises_the_reply_budget_over_its_steps(tmp_path):
    cfg = load_rl_config(None, [
        f'runs_dir="{tmp_path}"', 'name="curriculum"', "threads=1", 'tasks.kind="copy"', "tasks.n_train=4",
        "tasks.n_eval=0", "tasks.max_tokens=6", "policy.sft_steps=0", "rollout.steps=3", "rollout.max_staleness=0",
        "rollout.groups_per_step=2", "rollout.group_size=2", "rollout.filter_zero_variance=false",
        "rollout.length_curriculum=[{from_step=0, max_reply_tokens=1}, {from_step=2, max_reply_tokens=3}]"])
    run_rl(cfg)
    rows = [json.loads(line) for line in (tmp_path / "curriculum" / "metrics.jsonl").open()]
    rl = {r["step"]: r for r in rows if r.get("phase") == "rl"}
    assert [rl[s]["length_max_reply_tokens"] for s in (0, 1, 2)] == [1.0, 1.0, 3.0]
    assert rl[0]["tokens_out_mean"] <= 1 and rl[1]["tokens_out_mean"] <= 1
    assert rl[2]["tokens_out_mean"] > 1       # the untrained policy seldom stops within 3 tokens
