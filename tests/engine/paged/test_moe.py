"""The runner on a Qwen3-MoE (models/tiny.py "tiny-moe"): its logprobs are HF's, and the experts
it reports per token and MoE layer are HF's router top-k on the same tokens, through forked
group prompts, prefix-cache hits, preemption and rejected drafts alike (engine/paged/routing.py)."""

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.local import LocalEngine
from posttrain.models.tiny import build_tiny_model
from posttrain.train.logprobs import token_logprobs

PROMPTS = [[5, 9, 30, 31, 2, 7, 8] * 3, [5, 9, 30, 31, 2, 7, 8] * 3, [11, 12]]  # a group of 2, one more


def _moe():
    return build_tiny_model(300, "tiny-moe", seed=1)


def _hf_top_k(model, ids: list[int]) -> torch.Tensor:
    """HF's router top-k of every token, as sets: [T, moe layers, k] sorted."""
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_router_logits=True)
    k = model.config.num_experts_per_tok
    return torch.stack([logits.topk(k, dim=-1).indices for logits in out.router_logits], 1).sort(-1).values


def test_engine_logprobs_match_hf_forward_on_a_tiny_moe():
    model = _moe()
    out = LocalEngine(model, config=EngineConfig(block_size=4)).generate(
        PROMPTS, SamplingParams(temperature=0.8, max_tokens=12, seed=3))
    for p, c in zip(PROMPTS, out):
        ids = torch.tensor([p + c.token_ids])
        with torch.no_grad():
            want = token_logprobs(model, ids, torch.ones_like(ids), 0.8)[0, len(p):]
        assert (want - torch.tensor(c.logprobs)).abs().max() < 1e-5


def test_engine_routing_is_hf_router_top_k_in_fp32():
    model = _moe()
    engine = LocalEngine(model, config=EngineConfig(block_size=4))
    params = SamplingParams(temperature=1.0, max_tokens=10, seed=5)
    first = engine.generate(PROMPTS, params)
    before = engine.stats.prefill_tokens
    again = engine.generate(PROMPTS[:1], params)  # its prompt blocks are prefix-cache hits now
    assert engine.stats.prefill_tokens - before < len(PROMPTS[0])
    for p, c in list(zip(PROMPTS, first)) + [(PROMPTS[0], again[0])]:
        routing = torch.tensor(c.routing)  # [positions, moe layers, k]
        ids = p + c.token_ids
        assert routing.shape == (len(ids) - 1, 4, 2)  # every token the engine ran: all but the last
        assert torch.equal(routing.sort(-1).values, _hf_top_k(model, ids)[: len(ids) - 1])


@pytest.mark.parametrize("config", [
    EngineConfig(block_size=4, num_blocks=20, max_num_batched_tokens=16),  # preempted, chunked prefill
    EngineConfig(spec_method="ngram", spec_tokens=3),  # drafts' rejected slots are written over
], ids=["preempt-chunk", "ngram"])
def test_routing_survives_preemption_chunking_and_speculation(config):
    model = _moe()
    prompts = [[5 + i, 9, 30, 31, 2, 7, 8, 9, 30, 31] for i in range(6)]
    engine = LocalEngine(model, config=config)
    out = engine.generate(prompts, SamplingParams(temperature=1.0, max_tokens=25, seed=2))
    if config.num_blocks:
        assert engine.scheduler.num_preempted > 0
    else:  # some drafts were rejected: their slots' routing was written, then written over
        assert engine.stats.spec_proposed > engine.stats.spec_accepted
    for p, c in zip(prompts, out):
        ids = p + c.token_ids
        assert torch.equal(torch.tensor(c.routing).sort(-1).values, _hf_top_k(model, ids)[: len(ids) - 1])


def test_a_dense_model_returns_no_routing():
    out = LocalEngine(build_tiny_model(300)).generate([[5, 9, 30]], SamplingParams(max_tokens=3))
    assert out[0].routing is None
