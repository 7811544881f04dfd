"""`posttrain rl` on a tiny MoE (policy.preset = "tiny-moe") with algo.routing_replay: the embedded
engine's routing reaches the trainer, which replays it (0 mismatched decisions) and logs the
aux loss; replay with a dense preset or with vLLM's engines is a config error."""

import json

import pytest

from posttrain.errors import ConfigError
from posttrain.recipes.rl.run import run_rl
from posttrain.recipes.rl.config import load_rl_config


def test_an_rl_step_on_a_tiny_moe_replays_the_engines_routing(tmp_path):
    cfg = load_rl_config(None, [f"runs_dir={json.dumps(str(tmp_path / 'runs'))}", "threads=1", "tasks.kind=copy",
                                "tasks.n_train=4", "tasks.n_eval=0", "tasks.max_tokens=4", "policy.sft_steps=0",
                                "policy.vocab_size=300", "policy.preset=tiny-moe", "rollout.steps=1",
                                "rollout.max_staleness=0", "rollout.groups_per_step=2", "rollout.group_size=2",
                                "algo.routing_replay=true"])
    assert run_rl(cfg)["steps_trained"] == 1
    step = json.loads((cfg.run_dir / "metrics.jsonl").read_text().splitlines()[0])
    assert step["moe_router_mismatch"] == 0 and step["moe_aux_loss"] > 0


@pytest.mark.parametrize("sets, message", [
    (["algo.routing_replay=true"], "MoE models"),
    (["algo.routing_replay=true", "policy.preset=tiny-moe", "engines.kind=vllm"], "does not return"),
])
def test_replay_that_cannot_run_is_a_config_error(sets, message):
    with pytest.raises(ConfigError, match=message):
        load_rl_config(None, sets)
