"""LoRA adapters (train/lora.py, optim.lora_rank): only adapters train, the step descends the
full model's loss, and engines and checkpoints get the merged weights as a plain model."""

import copy

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import LocalEngine
from posttrain.errors import PosttrainError
from posttrain.rollout.weights import LockedEngine
from posttrain.train.batch import collate
from posttrain.train.checkpoint import load_checkpoint, save_checkpoint
from posttrain.train.logprobs import token_logprobs
from posttrain.train.lora import has_lora, serving_state
from posttrain.train.packed import packed_logprobs
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig

from test_prompt_sharing import _groups, _model

LORA = OptimConfig(lr=1e-2, lora_rank=4, lora_alpha=8)


def _trained_lora(step="rl"):
    model = _model()
    trainer = PolicyTrainer(model, 0, LORA)
    episodes = _groups(2, 4, True)
    trainer.rl_step(episodes, RLConfig()) if step == "rl" else trainer.sft_step(episodes)
    return model, trainer, episodes


def _plain_with(state: dict):
    plain = _model()
    missing, unexpected = plain.load_state_dict(state, strict=False)
    assert not unexpected and all(k == "lm_head.weight" for k in missing)
    return plain.eval()


@pytest.mark.parametrize("step", ["rl", "sft"])
def test_a_lora_step_changes_only_the_adapters(step):
    before = {k: v.clone() for k, v in _model().state_dict().items()}
    model, trainer, _ = _trained_lora(step)
    assert trainer.setup["trainable_params"] == sum(p.numel() for p in trainer.params)
    assert all(".lora_" in n for n, p in model.named_parameters() if p.requires_grad)
    assert {id(p) for p in trainer.optimizer.param_groups[0]["params"]} == {id(p) for p in trainer.params}
    for name, value in model.state_dict().items():
        if ".lora_" not in name:
            assert torch.equal(value, before[name.replace(".base_layer.", ".")]), name
    assert any(not torch.equal(p, torch.zeros_like(p)) for n, p in model.named_parameters()
               if "lora_B" in n)


def test_merged_weights_give_the_lora_models_forward():
    model, _, episodes = _trained_lora()
    b = collate(episodes, 0)
    with torch.no_grad():
        lora = token_logprobs(model, b.input_ids, b.attention_mask)
        merged = token_logprobs(_plain_with(serving_state(model)), b.input_ids, b.attention_mask)
        base = token_logprobs(_model().eval(), b.input_ids, b.attention_mask)
    assert torch.allclose(lora, merged, atol=1e-5)
    assert (lora - base).abs().max() > 1e-3  # the adapters moved the policy


@pytest.mark.parametrize("targets", [None, ("q_proj", "v_proj", "down_proj")])
def test_the_packed_forward_runs_the_adapters_as_the_hf_modules_do(targets):
    optim = LORA if targets is None else LORA.model_copy(update={"lora_targets": targets})
    model = _model()
    trainer = PolicyTrainer(model, 0, optim)
    trainer.sft_step(_groups(2, 4, True))  # B != 0
    episodes = _groups(3, 4, True)
    b = collate(episodes, 0)
    results = []
    for forward in (lambda: token_logprobs(model, b.input_ids, b.attention_mask),
                    lambda: packed_logprobs(model, episodes),
                    lambda: packed_logprobs(model, episodes, trim=False)):
        model.zero_grad()
        lp = forward()
        (lp * b.loss_mask).sum().backward()
        results.append(((lp * b.loss_mask).detach(), [p.grad.clone() for p in trainer.params]))
    for lp, grads in results[1:]:
        assert (lp - results[0][0]).abs().max() <= 1e-5
        for a, c in zip(results[0][1], grads):
            assert torch.allclose(a, c, atol=1e-5, rtol=1e-3)
    assert all(p.grad is None for p in model.parameters() if not p.requires_grad)


def test_the_lora_step_descends_the_full_models_loss():
    """Every adapted matrix moves along a descent direction of the full-parameter gradient:
    <W_merged - W, -dL/dW> > 0 (Adam's first step on B: -lr s sign(G A^T) A)."""
    episodes = _groups(2, 4, True)
    full = _model()
    PolicyTrainer(full, 0, OptimConfig(lr=1e-9)).sft_step(episodes)
    grads = {n: p.grad for n, p in full.named_parameters()}
    model, _, _ = _trained_lora("sft")
    state, base = serving_state(model), _model().state_dict()
    adapted = [n for n in grads if "_proj" in n]
    assert len(adapted) == 14
    for name in adapted:
        assert ((state[name] - base[name]) * -grads[name]).sum() > 0, name


def test_the_engine_serves_the_merged_policy_after_a_publish():
    model = _model()
    engine = LockedEngine(LocalEngine(copy.deepcopy(model)))
    trainer = PolicyTrainer(model, 0, LORA)
    episodes = _groups(2, 4, False)
    trainer.rl_step(episodes, RLConfig())
    engine.publish(trainer.model, 1)
    prompt = episodes[0].tokens[:episodes[0].prompt_len]
    out = engine.generate([prompt], SamplingParams(temperature=1.0, max_tokens=6, seed=0))[0]
    ids = torch.tensor([prompt + out.token_ids])
    with torch.no_grad():
        mine = token_logprobs(model, ids, torch.ones_like(ids))[0, len(prompt):]
    assert engine.policy_version == 1
    assert torch.allclose(mine, torch.tensor(out.logprobs), atol=1e-4)


def test_vllm_gets_the_merged_weights_as_a_plain_model():
    """What a vLLM server loads on an update: the staged safetensors of the published state."""
    from safetensors.torch import load_file

    from posttrain.engine.clients.weight_files import staged_weights

    model, _, episodes = _trained_lora()
    engine = LockedEngine(LocalEngine(copy.deepcopy(_model())))
    with staged_weights(engine._state_of(model)) as (directory, _):
        served = _plain_with(load_file(str(directory / "model.safetensors")))
    b = collate(episodes, 0)
    with torch.no_grad():
        assert torch.allclose(token_logprobs(served, b.input_ids, b.attention_mask),
                              token_logprobs(model, b.input_ids, b.attention_mask), atol=1e-5)


def test_a_second_trainer_trains_the_adapters_it_finds():
    model, first, episodes = _trained_lora("sft")
    second = PolicyTrainer(model, 0, LORA)
    assert [id(p) for p in second.params] == [id(p) for p in first.params]
    second.rl_step(episodes, RLConfig())


def test_the_checkpoint_is_a_plain_hf_model_with_the_adapters_merged(tmp_path):
    from transformers import AutoModelForCausalLM

    model, trainer, episodes = _trained_lora()
    path = save_checkpoint(tmp_path, 1, model, None, trainer, {})
    loaded = AutoModelForCausalLM.from_pretrained(path / "model").eval()
    assert not has_lora(loaded)
    b = collate(episodes, 0)
    with torch.no_grad():
        assert torch.allclose(token_logprobs(loaded, b.input_ids, b.attention_mask),
                              token_logprobs(model, b.input_ids, b.attention_mask), atol=1e-5)
    resumed = _model()
    again = PolicyTrainer(resumed, 0, LORA)
    load_checkpoint(path, resumed, again)
    assert all(torch.equal(a, c) for a, c in zip(resumed.state_dict().values(), model.state_dict().values()))
    assert again.optimizer.state_dict()["state"].keys() == trainer.optimizer.state_dict()["state"].keys()
    (path / "adapters.safetensors").unlink()
    with pytest.raises(PosttrainError, match="LoRA"):
        load_checkpoint(path, resumed, again)
