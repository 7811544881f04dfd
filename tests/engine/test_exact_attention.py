"""Batch-invariant fp32 logprobs: a batch_invariant engine and a trainer with exact attention
give the same bits for the same tokens, in every cache, batch and chunking configuration."""

import copy

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import EngineConfig, LocalEngine
from posttrain.kernels.exact_attention import use_exact_attention, uses_exact_attention
from posttrain.train.batch import right_pad
from posttrain.train.logprobs import token_logprobs

G = torch.Generator().manual_seed(0)
BASE = [torch.randint(10, 390, (int(n),), generator=G).tolist() for n in (5, 23, 40, 57, 70)]
PROMPTS = BASE + [BASE[0]] * 3 + [BASE[3]] * 2  # mixed lengths and two GRPO groups

CONFIGS = {
    "default": dict(),
    "tiny-blocks-preempt": dict(block_size=4, num_blocks=60, max_num_batched_tokens=16),
    "chunked": dict(block_size=3, max_num_seqs=3, max_num_batched_tokens=7),
    "no-prefix-cache": dict(enable_prefix_caching=False),
    "ngram": dict(spec_method="ngram", spec_tokens=3),
}


@pytest.fixture(scope="module")
def exact_model(model):
    return use_exact_attention(copy.deepcopy(model))


def deltas(trainer, prompts, out, temperature, padded=True) -> torch.Tensor:
    """|trainer - engine| per sampled token, the trainer scoring all rows in one padded batch
    (padded=True) or each sequence alone."""
    seqs = [p + c.token_ids for p, c in zip(prompts, out)]
    with torch.no_grad():
        if padded:
            ids, mask = right_pad(seqs)
            rows = token_logprobs(trainer, ids, mask, temperature)
        else:
            rows = [token_logprobs(trainer, torch.tensor([s]), torch.ones(1, len(s)), temperature)[0] for s in seqs]
    return torch.cat([(rows[i][len(p) : len(p) + len(c.token_ids)] - torch.tensor(c.logprobs)).abs()
                      for i, (p, c) in enumerate(zip(prompts, out))])


@pytest.mark.parametrize("name", list(CONFIGS))
def test_engine_logprobs_equal_the_exact_trainer_bit_for_bit(exact_model, name):
    eng = LocalEngine(exact_model, config=EngineConfig(batch_invariant=True, **CONFIGS[name]))
    assert eng.exact_attention and eng.batch_invariant
    params = SamplingParams(temperature=0.8, max_tokens=20, seed=3)
    miss = eng.generate(PROMPTS, params)
    hit = eng.generate(PROMPTS, params)  # second call: prompt blocks from the prefix cache
    for out in (miss, hit):
        assert deltas(exact_model, PROMPTS, out, 0.8).max().item() == 0.0
    assert deltas(exact_model, PROMPTS[:3], miss[:3], 0.8, padded=False).max().item() == 0.0
    assert [c.token_ids for c in miss] == [c.token_ids for c in hit]


@pytest.mark.parametrize("batch", [1, 4, 10])
def test_batch_size_does_not_change_a_rows_bits(exact_model, batch):
    params = SamplingParams(temperature=1.0, max_tokens=12, seed=0)
    alone = LocalEngine(exact_model, config=EngineConfig(batch_invariant=True)).generate(PROMPTS[:1], params)
    out = LocalEngine(exact_model, config=EngineConfig(batch_invariant=True)).generate(PROMPTS[:batch], params)
    assert out[0].logprobs == alone[0].logprobs
    assert deltas(exact_model, PROMPTS[:batch], out, 1.0).max().item() == 0.0


def test_exact_attention_is_attention_and_trains(model, exact_model):
    """Same model to float rounding; gradients flow through the float64 casts."""
    assert uses_exact_attention(exact_model) and not uses_exact_attention(model)
    ids = torch.tensor([BASE[4]])
    mask = torch.ones_like(ids)
    lp_plain = token_logprobs(model, ids, mask, 0.7)
    lp_exact = token_logprobs(exact_model, ids, mask, 0.7)
    assert (lp_plain - lp_exact).abs().max().item() < 1e-4
    lp_exact.sum().backward()
    grad = exact_model.model.layers[0].self_attn.q_proj.weight.grad
    assert grad is not None and grad.abs().sum() > 0
    exact_model.zero_grad(set_to_none=True)


def test_default_engine_keeps_float32_attention(model):
    assert not LocalEngine(model).exact_attention
    assert not LocalEngine(model, config=EngineConfig(batch_invariant=True, dtype="bfloat16")).exact_attention
