"""Sampling functions: processed distributions and the inverse-CDF sampler."""

import pytest
import torch

from posttrain.engine.paged.sampling import make_generators, process_logits, sample_rows

CHI2_DF3_P001 = 16.27


def test_top_k_and_top_p_renormalise():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    one = torch.ones(1)
    lp = process_logits(logits, one, torch.tensor([0.7]), torch.zeros(1, dtype=torch.long))
    assert torch.allclose(lp.exp(), torch.tensor([[0.625, 0.375, 0, 0]]), atol=1e-6)
    lp = process_logits(logits, one, one, torch.tensor([1]))
    assert torch.allclose(lp.exp(), torch.tensor([[1.0, 0, 0, 0]]))
    lp = process_logits(logits, torch.tensor([0.5]), one, torch.zeros(1, dtype=torch.long))
    assert torch.allclose(lp.exp(), torch.softmax(logits / 0.5, -1), atol=1e-6)


def test_sampler_matches_distribution_and_skips_masked_tokens():
    probs = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.0])
    logp = probs.log().expand(4000, -1).contiguous()
    ids, lps = sample_rows(logp, torch.zeros(4000, dtype=torch.bool), make_generators(0, 4000))
    counts = torch.bincount(ids, minlength=5).float()
    assert counts[4] == 0
    expected = probs[:4] * 4000
    assert float(((counts[:4] - expected) ** 2 / expected).sum()) < CHI2_DF3_P001
    assert torch.allclose(lps, probs.log()[ids])


def test_two_level_sampler_matches_distribution_across_chunks():
    """A vocabulary of several sampler chunks: mass on tokens at chunk edges and in the short
    last chunk is drawn in proportion, and masked tokens never."""
    from posttrain.engine.paged.sampling import CHUNK, Processed

    vocab = 3 * CHUNK + 100
    hot = torch.tensor([0, CHUNK - 1, CHUNK, 2 * CHUNK + 5, vocab - 1])
    probs = torch.tensor([0.1, 0.2, 0.3, 0.15, 0.25])
    logits = torch.full((4000, vocab), float("-inf"))
    logits[:, hot] = probs.log()
    logits[:, 7] = -40.0  # a kept token of negligible weight, beside masked ones
    ids, lps = Processed(logits, torch.ones(4000), torch.ones(4000), torch.zeros(4000, dtype=torch.long)).sample(
        list(range(4000)), make_generators(3, 4000))
    assert set(ids.tolist()) <= set(hot.tolist()) | {7}
    counts = torch.stack([(ids == h).sum() for h in hot]).float()
    expected = probs * 4000
    assert float(((counts - expected) ** 2 / expected).sum()) < 18.47  # chi-square, 4 df, p = 0.001
    assert torch.isfinite(lps).all()


def test_greedy_rows_take_argmax_and_seeds_reproduce():
    logp = torch.log_softmax(torch.randn(6, 50, generator=torch.Generator().manual_seed(0)), -1)
    greedy = torch.tensor([True, False] * 3)
    a, _ = sample_rows(logp, greedy, make_generators(5, 6))
    b, _ = sample_rows(logp, greedy, make_generators(5, 6))
    assert torch.equal(a, b) and torch.equal(a[::2], logp.argmax(-1)[::2])


@pytest.mark.parametrize("temperature,top_p,top_k", [(1.0, 1.0, 0), (0.7, 1.0, 0), (0.0, 1.0, 0), (0.8, 0.9, 5)])
def test_processed_rows_have_the_trainer_forms_bits(temperature, top_p, top_k):
    """In-place processing gives scaled - logsumexp(scaled) of the out-of-place scaling, bit for bit,
    for full rows and for the sampled tokens, with any mix of temperatures."""
    from posttrain.engine.paged.sampling import Processed, scale_logits

    logits = torch.randn(6, 3000, generator=torch.Generator().manual_seed(4)) * 4
    t = torch.tensor([temperature] * 5 + [1.0])  # a mixed batch: one row at T = 1
    p, k = torch.full((6,), top_p), torch.full((6,), top_k, dtype=torch.long)
    scaled = scale_logits(logits, t, p, k)
    want = scaled - torch.logsumexp(scaled, dim=-1, keepdim=True)
    dist = Processed(logits.clone(), t, p, k)
    assert torch.equal(dist.logp(0, 6), want)
    ids, lps = dist.sample([0, 2, 5], make_generators(1, 3))
    assert torch.equal(lps, want[[0, 2, 5]].gather(-1, ids.unsqueeze(-1)).squeeze(-1))
    assert torch.isfinite(lps).all()


def test_logsumexp_rows_has_torch_bits():
    from posttrain.engine.paged.sampling import _exp_and_logsumexp

    x = torch.randn(9, 5000, generator=torch.Generator().manual_seed(2)) * 30
    x[3] = float("-inf")  # an all -inf row: max is replaced by 0, as in ATen
    assert torch.equal(_exp_and_logsumexp(x)[1], torch.logsumexp(x, dim=-1, keepdim=True))
