"""SmolLM2-135M: a batch_invariant engine's fp32 logprobs against a trainer with exact
attention, to 1e-5, in the cache, batch and chunking configurations of the tiny model's test
(slow: about a minute on 2 cores; SmolLM2 comes from `posttrain models import`)."""

import copy

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import EngineConfig, LocalEngine
from posttrain.kernels.exact_attention import use_exact_attention
from posttrain.models.tiny import load_policy
from posttrain.train.batch import right_pad
from posttrain.train.logprobs import token_logprobs

pytestmark = pytest.mark.slow

CONFIGS = {
    "default": dict(),
    "tiny-blocks-preempt": dict(block_size=4, num_blocks=400, max_num_batched_tokens=16),
    "chunked": dict(block_size=3, max_num_seqs=3, max_num_batched_tokens=7),
    "ngram": dict(spec_method="ngram", spec_tokens=3),
}


@pytest.fixture(scope="module")
def trainer(smollm2_dir):
    model, _ = load_policy(smollm2_dir)
    return use_exact_attention(model)


def test_smollm2_engine_matches_the_exact_trainer_within_1e5(trainer):
    g = torch.Generator().manual_seed(0)
    vocab = trainer.config.vocab_size
    base = [torch.randint(20, vocab - 1, (n,), generator=g).tolist() for n in (5, 40, 70)]
    prompts = base + [base[0]] * 3  # mixed lengths and a GRPO group
    params = SamplingParams(temperature=0.7, max_tokens=12, seed=3)
    for name, cfg in CONFIGS.items():
        eng = LocalEngine(trainer, config=EngineConfig(batch_invariant=True, **cfg))
        for out in (eng.generate(prompts, params), eng.generate(prompts, params)):  # miss, then prefix hit
            ids, mask = right_pad([p + c.token_ids for p, c in zip(prompts, out)])
            with torch.no_grad():
                lp = token_logprobs(trainer, ids, mask, 0.7)
            worst = max((lp[i, len(p) : len(p) + 12] - torch.tensor(c.logprobs)).abs().max().item()
                        for i, (p, c) in enumerate(zip(prompts, out)))
            assert worst <= 1e-5, (name, worst)
    alone = LocalEngine(trainer, config=EngineConfig(batch_invariant=True)).generate(prompts[:1], params)
    batched = LocalEngine(trainer, config=EngineConfig(batch_invariant=True)).generate(prompts, params)
    assert alone[0].logprobs == batched[0].logprobs  # a row's bits do not depend on its batch


def test_plain_sdpa_trainer_is_what_exact_attention_fixes(trainer):
    """Against the SDPA trainer the same engine is ~1e-5 off: the test above can fail."""
    plain = copy.deepcopy(trainer)
    plain.config._attn_implementation = "sdpa"
    prompt = torch.randint(20, 40000, (70,), generator=torch.Generator().manual_seed(1)).tolist()
    out = LocalEngine(trainer, config=EngineConfig(batch_invariant=True)).generate(
        [prompt] * 4, SamplingParams(temperature=0.7, max_tokens=24, seed=0))
    ids = torch.tensor([prompt + out[0].token_ids])
    with torch.no_grad():
        sdpa = token_logprobs(plain, ids, torch.ones_like(ids), 0.7)[0, 70:]
        exact = token_logprobs(trainer, ids, torch.ones_like(ids), 0.7)[0, 70:]
    assert (exact - torch.tensor(out[0].logprobs)).abs().max().item() == 0.0
    assert (sdpa - torch.tensor(out[0].logprobs)).abs().max().item() > 0.0
