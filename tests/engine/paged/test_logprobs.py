"""The trainer's token_logprobs: padding invariance, temperature, gradients."""

import torch

from posttrain.train.batch import right_pad
from posttrain.train.logprobs import token_entropy, token_logprobs


def _batch(seqs):
    return right_pad(seqs)


def test_right_padding_matches_unpadded_rows(model):
    seqs = [[1, 3, 40, 41, 42, 43, 44], [1, 3, 50], [1, 60, 61, 62, 63]]
    ids, mask = _batch(seqs)
    batched = token_logprobs(model, ids, mask)
    for i, s in enumerate(seqs):
        alone = token_logprobs(model, *_batch([s]))[0]
        assert torch.allclose(batched[i, : len(s)], alone, atol=1e-5)
        assert torch.all(batched[i, len(s) :] == 0)
    assert torch.all(batched[:, 0] == 0)


def test_matches_log_softmax_at_temperature(model):
    ids, mask = _batch([[1, 3, 40, 41, 42]])
    lp = token_logprobs(model, ids, mask, temperature=0.7)
    with torch.no_grad():
        logits = model(ids).logits[0, :-1] / 0.7
    want = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None]).squeeze(-1)
    assert torch.allclose(lp[0, 1:], want, atol=1e-5)


def test_gradients_flow_and_entropy_is_positive(model):
    ids, mask = _batch([[1, 3, 40, 41], [1, 5]])
    lp = token_logprobs(model, ids, mask)
    lp.sum().backward()
    grad = model.model.embed_tokens.weight.grad
    assert grad is not None and grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        ent = token_entropy(model, ids, mask)
    assert torch.all(ent[0, 1:] > 0) and torch.all(ent[1, 2:] == 0)
