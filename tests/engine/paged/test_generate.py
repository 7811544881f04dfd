"""LocalEngine.generate: logprob agreement with the trainer, seeds, stops, lengths, errors."""

import time

import pytest
import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import LocalEngine
from posttrain.train.batch import right_pad
from posttrain.train.logprobs import token_logprobs

PROMPTS = [[1, 3, 40, 41, 42, 43, 44, 45, 46], [1, 3, 50], [1, 3] + list(range(60, 80)), [1, 3, 50]]


@pytest.fixture()
def engine(model, tokenizer):
    return LocalEngine(model, tokenizer)


def trainer_logprobs(model, prompts, completions, temperature):
    """Recompute the sampled tokens' logprobs with the trainer's forward (right-padded)."""
    seqs = [p + c.token_ids for p, c in zip(prompts, completions)]
    ids, mask = right_pad(seqs)
    with torch.no_grad():
        lp = token_logprobs(model, ids, mask, temperature)
    return [lp[i, len(p) : len(p) + len(c.token_ids)] for i, (p, c) in enumerate(zip(prompts, completions))]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_agree_with_trainer(engine, model, temperature):
    out = engine.generate(PROMPTS, SamplingParams(temperature=temperature, max_tokens=16, seed=1))
    for got, c in zip(trainer_logprobs(model, PROMPTS, out, temperature), out):
        assert len(c.token_ids) == len(c.logprobs) == 16
        assert (got - torch.tensor(c.logprobs)).abs().max().item() <= 1e-4


def test_seed_reproduces_and_differs(engine):
    p = SamplingParams(max_tokens=12, seed=7)
    a, b = engine.generate(PROMPTS, p), engine.generate(PROMPTS, p)
    c = engine.generate(PROMPTS, SamplingParams(max_tokens=12, seed=8))
    assert [x.token_ids for x in a] == [x.token_ids for x in b]
    assert [x.token_ids for x in a] != [x.token_ids for x in c]
    assert a[1].token_ids != a[3].token_ids  # same prompt, different rows of a group


def test_seed_rows_keep_a_rows_sample_whatever_shares_its_call(engine):
    both = engine.generate(PROMPTS[:2], SamplingParams(max_tokens=12, seed=7, seed_rows=[40, 3]))
    alone = engine.generate([PROMPTS[1]], SamplingParams(max_tokens=12, seed=7, seed_rows=[3]))
    by_position = engine.generate([PROMPTS[1]], SamplingParams(max_tokens=12, seed=7))
    assert alone[0].token_ids == both[1].token_ids
    assert by_position[0].token_ids != both[1].token_ids  # row 0's stream is another one
    with pytest.raises(ValueError, match="seed_rows"):
        engine.generate(PROMPTS[:2], SamplingParams(max_tokens=4, seed=7, seed_rows=[1]))


def test_greedy_is_argmax(engine, model):
    out = engine.generate([PROMPTS[0]], SamplingParams(temperature=0, max_tokens=5))[0]
    seq = list(PROMPTS[0])
    with torch.no_grad():
        for tok in out.token_ids:
            assert tok == int(model(torch.tensor([seq])).logits[0, -1].argmax())
            seq.append(tok)


def test_stop_token_is_included_and_ends(engine):
    free = engine.generate([PROMPTS[0]], SamplingParams(temperature=0, max_tokens=8))[0]
    stop = free.token_ids[3]
    first = free.token_ids.index(stop)
    out = engine.generate([PROMPTS[0]], SamplingParams(temperature=0, max_tokens=8, stop_token_ids=[stop]))
    assert out[0].finish_reason == "stop"
    assert out[0].token_ids == free.token_ids[: first + 1]


def test_max_tokens_gives_length(engine):
    out = engine.generate(PROMPTS, SamplingParams(max_tokens=3, seed=0))
    assert all(len(c.token_ids) == 3 and c.finish_reason == "length" for c in out)


def test_top_p_logprobs_are_of_the_truncated_distribution(engine, model):
    out = engine.generate([PROMPTS[0]] * 4, SamplingParams(top_p=0.5, max_tokens=6, seed=0))
    full = trainer_logprobs(model, [PROMPTS[0]] * 4, out, 1.0)
    for got, c in zip(full, out):
        assert torch.all(torch.tensor(c.logprobs) >= got - 1e-5)  # renormalised: never lower


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(temperature=-1), "temperature"),
        (dict(top_p=0), "top_p"),
        (dict(max_tokens=0), "max_tokens"),
        (dict(top_k=-2), "top_k"),
    ],
)
def test_bad_params_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SamplingParams(**kwargs)


def test_bad_prompts_raise(engine):
    with pytest.raises(ValueError, match="empty"):
        engine.generate([[]], SamplingParams())
    with pytest.raises(ValueError, match="outside"):
        engine.generate([[1, 10**6]], SamplingParams())
    with pytest.raises(ValueError, match="at least one"):
        engine.generate([], SamplingParams())


def test_update_weights_copies_in_place_and_sets_version(tokenizer):
    from posttrain.models.tiny import build_tiny_model

    target = build_tiny_model(len(tokenizer), seed=5)
    eng = LocalEngine(build_tiny_model(len(tokenizer), seed=0), tokenizer)
    p = SamplingParams(temperature=0, max_tokens=6)
    eng.update_weights(target.state_dict(), version=3)
    want = LocalEngine(target, tokenizer).generate([PROMPTS[0]], p)[0].token_ids
    got = eng.generate([PROMPTS[0]], p)[0]
    assert got.token_ids == want and got.policy_version == 3


def test_group_of_64_is_quick(engine):
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(10, 300, (int(n),), generator=g).tolist() for n in (120, 250, 380, 200)]
    t0 = time.perf_counter()
    out = engine.generate([p for p in prompts for _ in range(16)], SamplingParams(max_tokens=40, seed=0))
    assert len(out) == 64 and time.perf_counter() - t0 < 30


def test_engine_leaves_the_shared_model_mode_alone(model, tokenizer):
    model.train()
    try:
        LocalEngine(model, tokenizer).generate([PROMPTS[0]], SamplingParams(max_tokens=2, seed=0))
        assert model.training
    finally:
        model.eval()
