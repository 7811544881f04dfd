"""Logprobs and entropies in chunks of tokens (train/chunked.py): the values and gradients of
the full-logits path, on their own, through every trainer forward of a tied-embedding model,
and in whole SFT and RL steps."""

import copy

import pytest
import torch

from posttrain.train.batch import collate
from posttrain.train.chunked import ChunkedHead, chunked_logprobs, plain_logprobs
from posttrain.train.logprobs import token_logprobs
from posttrain.train.packed import packed_logprobs
from posttrain.train.prefix import shared_prefix_logprobs
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig

from test_prompt_sharing import _groups, _model


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_values_and_gradients_equal_the_full_logits(temperature, chunk):
    torch.manual_seed(0)
    hidden = torch.randn(37, 24, requires_grad=True)
    weight = torch.randn(301, 24, requires_grad=True)
    targets = torch.randint(0, 301, (37,))
    g_lp, g_ent = torch.randn(37), torch.randn(37)  # a loss that uses both outputs
    results = []
    for fn in (lambda: chunked_logprobs(hidden, weight, targets, temperature, chunk),
               lambda: plain_logprobs(hidden, weight, targets, temperature)):
        lp, ent = fn()
        hidden.grad = weight.grad = None
        (lp * g_lp + ent * g_ent).sum().backward()
        results.append((lp.detach(), ent.detach(), hidden.grad.clone(), weight.grad.clone()))
    for a, b in zip(*results):
        assert torch.allclose(a, b, atol=2e-5, rtol=1e-4)
    assert (results[0][1] > 0).all()  # entropies of 301-way distributions


def _grads(model, loss) -> list[torch.Tensor]:
    model.zero_grad()
    loss.backward()
    return [p.grad.clone() for p in model.parameters()]


FORWARDS = {
    "hf": lambda m, eps, b, t, head: token_logprobs(m, b.input_ids, b.attention_mask, t, head),
    "hf-shared-prefix": lambda m, eps, b, t, head: shared_prefix_logprobs(m, eps, 0, t, head),
    "packed": lambda m, eps, b, t, head: packed_logprobs(m, eps, t, head=head),
    "packed-untrimmed": lambda m, eps, b, t, head: packed_logprobs(m, eps, t, trim=False, head=head),
}


@pytest.mark.parametrize("forward", FORWARDS)
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_every_forward_with_the_chunked_head_equals_its_plain_self(forward, temperature):
    """A tied-embedding model (lm_head is embed_tokens, as in SmolLM2): the embedding's
    gradient sums both of its uses either way."""
    model = _model()
    assert model.lm_head.weight is model.model.embed_tokens.weight
    episodes = _groups(3, 4, True)
    b = collate(episodes, 0)
    fn = FORWARDS[forward]
    plain = fn(model, episodes, b, temperature, None)
    chunked = fn(model, episodes, b, temperature, ChunkedHead(5))
    assert torch.allclose(plain, chunked, atol=1e-5)
    g_plain = _grads(model, (fn(model, episodes, b, temperature, None) * b.loss_mask).sum())
    g_chunked = _grads(model, (fn(model, episodes, b, temperature, ChunkedHead(5)) * b.loss_mask).sum())
    for a, c in zip(g_plain, g_chunked):
        assert torch.allclose(a, c, atol=1e-5, rtol=1e-4)


def _weights_after(step, optim: OptimConfig):
    model = _model()
    stats = step(PolicyTrainer(model, 0, optim))
    return stats, [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("packed", [True, False])
def test_rl_and_sft_steps_with_chunks_equal_the_plain_steps(packed):
    episodes = _groups(2, 4, True)
    steps = {"rl": lambda t: t.rl_step(copy.deepcopy(episodes), RLConfig(packed=packed)),
             "sft": lambda t: t.sft_step(copy.deepcopy(episodes))}
    for step in steps.values():
        (s_plain, w_plain), (s_chunk, w_chunk) = (
            _weights_after(step, OptimConfig(lr=1e-2, micro_batch=3, logprob_chunk=c)) for c in (0, 4))
        assert s_plain["loss"] == pytest.approx(s_chunk["loss"], abs=1e-6)
        assert s_plain["grad_norm"] == pytest.approx(s_chunk["grad_norm"], rel=1e-4)
        for a, c in zip(w_plain, w_chunk):
            assert torch.allclose(a, c, atol=1e-5)
