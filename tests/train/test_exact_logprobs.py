"""The trainer's exact logprob forwards (packed, trimmed or not, and HF) against a batch_invariant
fp32 engine, bit for bit, down to batches of a few token rows and at 1 and 2 threads (where
plain F.linear rounds some row counts differently from the engine's packed kernel)."""

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import EngineConfig, LocalEngine
from posttrain.kernels.exact_linear import exact_linear
from posttrain.kernels.packed import PackedLinear
from posttrain.models.tiny import build_tiny_model
from posttrain.train.batch import collate
from posttrain.train.logprobs import exact_token_logprobs
from posttrain.train.packed import packed_logprobs
from posttrain.types import Episode

G = torch.Generator().manual_seed(0)
PROMPTS = [torch.randint(10, 390, (n,), generator=G).tolist() for n in (3, 9, 30)]
BATCHES = {  # (prompts, new tokens): one tiny episode; a group whose logits share one row; a mix
    "one-episode-5-rows": ([PROMPTS[0]], 2),
    "group-of-4-one-token": ([PROMPTS[1]] * 4, 1),
    "mixed": ([PROMPTS[0]] * 2 + [PROMPTS[2]] * 3 + [PROMPTS[1]], 12),
}


@pytest.fixture(scope="module")
def model():
    return build_tiny_model(400, seed=0)


def sampled(model, prompts, new_tokens) -> list[Episode]:
    engine = LocalEngine(model, config=EngineConfig(batch_invariant=True))
    outs = engine.generate(prompts, SamplingParams(temperature=0.9, max_tokens=new_tokens, seed=5))
    return [Episode(task_id="t", group_id=0, tokens=p + o.token_ids, prompt_len=len(p),
                    loss_mask=[0] * len(p) + [1] * len(o.token_ids), logprobs=[0.0] * len(p) + o.logprobs)
            for p, o in zip(prompts, outs)]


def max_delta(lp: torch.Tensor, episodes: list[Episode]) -> float:
    b = collate(episodes, 0)
    return (lp - b.old_logprobs)[b.loss_mask.bool()].abs().max().item()


FORWARDS = {
    "packed-trim": lambda m, eps: packed_logprobs(m, eps, 0.9, trim=True, exact=True),
    "packed-full": lambda m, eps: packed_logprobs(m, eps, 0.9, trim=False, exact=True),
    "hf": lambda m, eps: (lambda b: exact_token_logprobs(m, b.input_ids, b.attention_mask, 0.9))(collate(eps, 0)),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("forward", list(FORWARDS))
@pytest.mark.parametrize("batch", list(BATCHES))
def test_exact_trainer_forwards_equal_the_engine(model, forward, batch, threads):
    torch.set_num_threads(threads)  # the autouse fixture restores it
    episodes = sampled(model, *BATCHES[batch])
    with torch.no_grad():
        assert max_delta(FORWARDS[forward](model, episodes), episodes) == 0.0


def test_exact_packed_forward_trains_and_leaves_the_default_alone(model):
    episodes = sampled(model, *BATCHES["mixed"])
    exact = packed_logprobs(model, episodes, 0.9, exact=True)
    plain = packed_logprobs(model, episodes, 0.9)
    assert (exact - plain).abs().max().item() < 1e-4  # the same model to float rounding
    exact.sum().backward()
    grad = model.model.layers[0].self_attn.q_proj.weight.grad
    assert grad is not None and grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)


@pytest.mark.parametrize("threads", [1, 2])
def test_exact_linear_has_the_engine_bits_at_any_row_and_thread_count(threads):
    """SmolLM2's down_proj shape, where plain F.linear at 2 threads rounds 57-192 rows unlike
    the packed kernel; also on a concatenated weight (the packed forward's gate/up)."""
    torch.set_num_threads(threads)  # the autouse fixture restores it
    g = torch.Generator().manual_seed(0)
    down, other = torch.nn.Linear(1536, 576, bias=False), torch.nn.Linear(1536, 64, bias=False)
    engine = PackedLinear(down)
    both = torch.cat([down.weight, other.weight])
    for rows in (1, 3, 15, 16, 60, 100, 190):
        x = torch.randn(rows, 1536, generator=g)
        assert torch.equal(exact_linear(x, down.weight), engine(x))
        assert torch.equal(exact_linear(x, both)[:, :576], engine(x))
    x = torch.randn(7, 1536, generator=g, requires_grad=True)
    exact_linear(x, down.weight).square().sum().backward()
    gx, gw = x.grad, down.weight.grad
    x.grad, down.weight.grad = None, None
    torch.nn.functional.linear(x, down.weight).square().sum().backward()
    assert torch.allclose(gx, x.grad, atol=1e-4) and torch.allclose(gw, down.weight.grad, atol=1e-4)
