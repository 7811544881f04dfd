"""`posttrain rl`'s RUN/config.json is the configuration that ran: values derived from others
(optim.compute_dtype under exact logprobs, optim.fused under trainer ranks, the gate's limits)
are resolved when the config is validated, not rewritten after it (recipes/rl/config.py)."""

import json

from posttrain.recipes.rl.config import RLRunConfig, load_rl_config
from posttrain.recipes.rl.run import run_rl
from posttrain.rollout.conformance import GATE_LIMITS


def test_config_json_equals_the_config_that_ran_derived_values_included(tmp_path):
    cfg = load_rl_config(None, [f"runs_dir={json.dumps(str(tmp_path / 'runs'))}", "tasks.kind=copy",
                                "tasks.n_train=4", "tasks.n_eval=0", "policy.sft_steps=2", "rollout.steps=1",
                                "rollout.max_staleness=0", "algo.exact_logprobs=true",
                                "optim.compute_dtype=auto"])
    summary = run_rl(cfg)
    saved = json.loads((cfg.run_dir / "config.json").read_text())
    assert saved == cfg.model_dump(mode="json")
    assert saved["optim"]["compute_dtype"] == "fp32" == summary["trainer"]["compute_dtype"]
    limits = (saved["engines"]["max_abs_logp"], saved["engines"]["mean_abs_logp"])
    assert limits == GATE_LIMITS[summary["engine"]["dtype"]] == GATE_LIMITS["float32"]
    # read back (as --resume does), it validates to itself
    assert RLRunConfig.model_validate(saved).model_dump(mode="json") == saved


def test_derived_values_are_in_the_validated_config():
    ranks = load_rl_config(None, ['cluster.executor="ray"', "cluster.trainer_ranks=2"])
    assert ranks.optim.fused is False
    assert load_rl_config(None).optim.fused is True
    assert load_rl_config(None, ["optim.compute_dtype=auto"]).optim.compute_dtype == "auto"
    bf16 = load_rl_config(None, ['engines.dtype="bfloat16"', "engines.mean_abs_logp=0.2"]).engines
    assert (bf16.max_abs_logp, bf16.mean_abs_logp) == (GATE_LIMITS["bfloat16"][0], 0.2)
