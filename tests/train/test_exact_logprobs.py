"""The trainer's exact logprob forwards (packed, trimmed or not, and HF) against a batch_invariant
fp32 engine, bit for bit, down to batches of a few token rows (where MKL's sgemm rounds
differently unless the rows are padded to PACK_HINT)."""

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.local import EngineConfig, LocalEngine
from posttrain.engine.tiny import build_tiny_model
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


@pytest.mark.parametrize("forward", list(FORWARDS))
@pytest.mark.parametrize("batch", list(BATCHES))
def test_exact_trainer_forwards_equal_the_engine(model, forward, batch):
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
