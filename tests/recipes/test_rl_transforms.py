"""`posttrain rl` with the trainer transforms (optim.lora_rank, optim.logprob_chunk,
optim.compute_dtype): the run records them and its final checkpoint is a plain HF model with
the adapters merged (the engine's side: tests/train/test_lora.py); misfits are config errors."""

import json

import pytest
import torch

from posttrain.errors import ConfigError, PosttrainError
from posttrain.recipes.rl import run_rl
from posttrain.recipes.rl_config import load_rl_config
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
    with pytest.raises(PosttrainError, match="LoRA"):
        run_rl(load_rl_config(None, _common(tmp_path)[:1], resume=True), resume=True)


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
    from posttrain.recipes.rl_cluster import make_trainer

    cfg = load_rl_config(None, ["algo.exact_logprobs=true"])
    assert cfg.optim.compute_dtype == "auto"
    assert make_trainer(cfg, build_tiny_model(300), 0, None).setup["compute_dtype"] == "fp32"
