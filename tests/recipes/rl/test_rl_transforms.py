"""`posttrain rl` with the trainer transforms (optim.lora_rank, optim.logprob_chunk,
optim.compute_dtype): the run records them and its final checkpoint is a plain HF model with
the adapters merged (the engine's side: tests/train/test_lora.py); misfits are config errors."""

import json

import pytest
import torch

from posttrain.errors import ConfigError
from posttrain.recipes.rl.run import run_rl
from posttrain.recipes.rl.config import load_rl_config
from posttrain.train.precision import resolve_dtype


def _common(tmp_path):
    return [f"runs_dir={json.dumps(str(tmp_path / 'runs'))}", "tasks.kind=copy", "tasks.n_train=4",
            "tasks.n_eval=0", "policy.sft_steps=2", "rollout.steps=1", "rollout.max_staleness=0"]


def test_a_lora_run_records_its_transforms_and_ends_in_a_merged_hf_checkpoint(tmp_path):
    from transformers import AutoModelForCausalLM

    from posttrain.train.logprobs import token_logprobs
    from posttrain.train.lora import has_lora

    cfg = load_rl_config(None, _common(tmp_path) + ["optim.lora_rank=4", "optim.logprob_chunk=8",
                                                    "optim.compute_dtype=auto"])
    summary = run_rl(cfg)
    assert summary["trainer"]["compute_dtype"] == resolve_dtype("auto")
    assert summary["trainer"]["lora_rank"] == 4 and summary["trainer"]["logprob_chunk"] == 8
    assert summary["steps_trained"] == 1
    final = cfg.run_dir / "checkpoints" / "step-000001" / "model"
    model = AutoModelForCausalLM.from_pretrained(final).eval()
    assert not has_lora(model)
    ids = torch.tensor([[1, 5, 9, 12, 30, 7]])
    with torch.no_grad():
        assert token_logprobs(model, ids, torch.ones_like(ids)).isfinite().all()


@pytest.mark.parametrize("sets, message", [
    (["algo.exact_logprobs=true", "optim.compute_dtype=bf16"], "computes the trainer's logprobs in fp32"),
    (["algo.exact_logprobs=true", "optim.lora_rank=4"], "optim.lora_rank = 0"),
    (["optim.compute_dtype=fp16"], "optim.compute_dtype"),
])
def test_transforms_that_do_not_fit_are_config_errors(sets, message):
    with pytest.raises(ConfigError, match=message):
        load_rl_config(None, sets)


def test_exact_logprobs_resolve_auto_to_fp32():
    from posttrain.models.tiny import build_tiny_model
    from posttrain.recipes.rl.cluster import make_trainer

    cfg = load_rl_config(None, ["algo.exact_logprobs=true", "optim.compute_dtype=auto"])
    assert make_trainer(cfg, build_tiny_model(300), 0, None).setup["compute_dtype"] == "fp32"


def test_a_lora_run_resumes_exactly(tmp_path):
    """Three steps whole, then the same run rewound to its step-2 checkpoint and resumed: the
    same metrics and the same final weights (the adapters and the base come back unmerged)."""
    from safetensors.torch import load_file

    base = [f"runs_dir={json.dumps(str(tmp_path / 'runs'))}", "threads=1", "tasks.kind=copy",
            "tasks.n_train=6",
            "tasks.n_eval=0", "tasks.max_tokens=4", "policy.sft_steps=0", "policy.vocab_size=300",
            "rollout.steps=3", "rollout.max_staleness=0", "rollout.groups_per_step=2", "rollout.group_size=3",
            "rollout.checkpoint_every=1", "rollout.overprovision=1", "optim.lora_rank=4"]
    cfg = load_rl_config(None, base)
    run_rl(cfg)
    ckpts = cfg.run_dir / "checkpoints"
    metrics = _metrics(cfg.run_dir)
    final = load_file(str(ckpts / "step-000003" / "model" / "model.safetensors"))
    (ckpts / "latest").write_text("step-000002")
    run_rl(load_rl_config(None, base, resume=True), resume=True)
    assert _metrics(cfg.run_dir) == metrics
    again = load_file(str(ckpts / "step-000003" / "model" / "model.safetensors"))
    assert all(torch.equal(final[k], again[k]) for k in final)


def _metrics(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    return [{k: v for k, v in r.items() if not (k.endswith("_s") or "idle" in k or "busy" in k)}
            for r in rows]


def test_the_quickstart_refuses_lora():
    from posttrain.recipes.quickstart.config import load_config

    with pytest.raises(ConfigError, match="LoRA"):
        load_config(None, "quick", ["rl.optim.lora_rank=4"])


def test_a_run_with_a_kl_reference_and_checkpointing_logs_the_kl(tmp_path):
    cfg = load_rl_config(None, _common(tmp_path) + ["rollout.steps=2", "algo.kl_coef=0.05",
                                                    "optim.activation_checkpointing=true"])
    summary = run_rl(cfg)
    assert summary["trainer"]["activation_checkpointing"] is True
    steps = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    kl = [s["kl_ref"] for s in steps if "kl_ref" in s]
    assert len(kl) == 2 and kl[0] == 0.0 and kl[1] > 0
    assert (cfg.run_dir / "checkpoints" / "reference.safetensors").is_file()


def test_policy_rope_scaling_reaches_the_run_and_its_checkpoint(tmp_path):
    """[policy.rope_scaling]: the run's model and its engine run YaRN at 4x the original length,
    and the final checkpoint keeps it in its config (the numbers: tests/engine/paged/
    test_engine_rope_scaling.py, tests/train/test_packed_rope_scaling.py)."""
    from transformers import AutoConfig

    from posttrain.recipes.rl.env import build_env

    rope = 'policy.rope_scaling={kind = "yarn", factor = 4, original_max = 256}'
    env = build_env(load_rl_config(None, _common(tmp_path) + [rope]), tmp_path, None)
    assert env.model.model.rotary_emb.rope_type == "yarn" and env.model.config.max_position_embeddings == 1024
    cfg = load_rl_config(None, _common(tmp_path) + [rope])
    run_rl(cfg)
    saved = AutoConfig.from_pretrained(cfg.run_dir / "checkpoints" / "step-000001" / "model")
    assert saved.rope_parameters["rope_type"] == "yarn" and saved.rope_parameters["factor"] == 4
    assert saved.rope_parameters["original_max_position_embeddings"] == 256


@pytest.mark.parametrize("table, message", [('{kind = "dynamic", factor = 4, original_max = 512}', "kind"),
                                            ('{kind = "yarn", factor = 0.5, original_max = 512}', "factor"),
                                            ('{kind = "yarn", factor = 4}', "original_max")])
def test_a_bad_rope_scaling_is_a_config_error(tmp_path, table, message):
    with pytest.raises(ConfigError, match=f"policy.rope_scaling.{message}"):
        load_rl_config(None, _common(tmp_path) + [f"policy.rope_scaling={table}"])
