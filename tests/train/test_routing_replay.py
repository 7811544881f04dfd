"""Routing replay (train/routing_replay.py) on a tiny Qwen3-MoE: replaying the model's own routing
is its HF forward; replaying an engine's gives 0 mismatched decisions and the router still gets
gradients (also through checkpointed layers); the aux loss is HF's; misuse is a clear error."""

import copy

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.local import LocalEngine
from posttrain.models.moe import moe_blocks
from posttrain.errors import PosttrainError
from posttrain.models.tiny import build_tiny_model
from posttrain.train.act_checkpoint import checkpoint_layers
from posttrain.train.batch import collate
from posttrain.train.logprobs import token_logprobs
from posttrain.train.routing_replay import check_replay, routed
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig
from posttrain.types import Episode

PROMPTS = [[1, 9, 30, 31, 2, 7, 8] * 2] * 3 + [[1, 12, 40]] * 3


def _moe():
    return build_tiny_model(300, "tiny-moe", seed=1)


def _episodes(model, dtype="bfloat16") -> list[Episode]:
    engine = LocalEngine(copy.deepcopy(model), config=EngineConfig(dtype=dtype))
    out = engine.generate(PROMPTS, SamplingParams(temperature=1.0, max_tokens=12, seed=3))
    eps = []
    for i, (p, c) in enumerate(zip(PROMPTS, out)):
        ep = Episode("t", i // 3, reward=float(i % 3))
        ep.append(p, sampled=False)
        ep.prompt_len = len(p)
        ep.append_completion(c)
        eps.append(ep)
    return eps


def test_replaying_the_models_own_routing_is_its_hf_forward():
    model = _moe()
    b = collate(_episodes(model, "float32"), 0)  # an fp32 engine routes as HF does
    with torch.no_grad():
        plain = token_logprobs(model, b.input_ids, b.attention_mask)
        with routed(model, b.routing, b.attention_mask) as stats:
            replayed = token_logprobs(model, b.input_ids, b.attention_mask)
    assert (plain - replayed).abs().max() < 1e-5
    assert stats["moe_router_mismatch"] == 0 and stats["moe_router_mismatch_own"] == 0
    assert all(type(block).forward is block.forward.__func__ for block in moe_blocks(model))  # restored


def test_replay_pins_the_engines_experts_and_the_router_still_learns():
    model = _moe()
    b = collate(_episodes(model), 0)
    with torch.no_grad(), routed(model, b.routing, b.attention_mask, pin=False) as off:
        token_logprobs(model, b.input_ids, b.attention_mask)  # recorded and compared, not pinned
    with routed(model, b.routing, b.attention_mask) as on:
        lp = token_logprobs(model, b.input_ids, b.attention_mask)
        (lp * b.loss_mask).sum().backward()
    assert on["moe_router_mismatch"] == 0
    assert off["moe_router_mismatch"] == off["moe_router_mismatch_own"]  # unpinned: the own ran
    assert all(block.gate.weight.grad.abs().sum() > 0 for block in moe_blocks(model))


def test_replay_through_checkpointed_layers_gives_the_same_gradients():
    model = _moe()
    b = collate(_episodes(model), 0)
    grads = []
    for m in (model, checkpoint_layers(copy.deepcopy(model))):
        with routed(m, b.routing, b.attention_mask):
            (token_logprobs(m, b.input_ids, b.attention_mask) * b.loss_mask).sum().backward()
        grads.append(moe_blocks(m)[0].gate.weight.grad)
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_the_aux_loss_is_hfs_load_balancing_loss():
    from transformers.models.qwen3_moe.modeling_qwen3_moe import load_balancing_loss_func

    model = _moe()
    ids = torch.tensor([[1, 9, 30, 31, 2, 7, 8, 40, 41]])
    with torch.no_grad():
        out = model(ids, output_router_logits=True)
        with routed(model) as stats:
            model(ids)
    # HF's sums f_e P_e over the layers' pooled tokens; ours is the mean of each layer's
    want = sum(load_balancing_loss_func((lg,), 8, 2) for lg in out.router_logits) / len(out.router_logits)
    assert stats["moe_aux_loss"] == pytest.approx(float(want), rel=1e-5)


def test_an_rl_step_with_replay_logs_router_metrics():
    model = _moe()
    eps = _episodes(model)
    off = PolicyTrainer(copy.deepcopy(model), 0, OptimConfig()).rl_step(eps, RLConfig())
    on = PolicyTrainer(copy.deepcopy(model), 0, OptimConfig()).rl_step(eps, RLConfig(routing_replay=True))
    assert on["moe_router_mismatch"] == 0 and off["moe_router_mismatch"] == off["moe_router_mismatch_own"]
    assert on["moe_aux_loss"] > 0 and on["grad_norm"] > 0


def test_replay_without_an_moe_model_or_engine_routing_is_an_error():
    eps = _episodes(_moe())
    with pytest.raises(PosttrainError, match="MoE models"):
        check_replay(build_tiny_model(300), eps)
    eps[0].routing = None
    with pytest.raises(PosttrainError, match="engine-returned routing"):
        check_replay(_moe(), eps)
