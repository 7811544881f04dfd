"""Speculative decoding: n-gram proposals and rejection sampling that keeps the distribution."""

import torch

from posttrain.engine.paged.speculative import propose_ngram, verify_draft

CHI2_DF4_P001 = 18.47  # chi-square critical value, 4 degrees of freedom, p = 0.001


def test_ngram_finds_latest_longest_match():
    toks = [1, 2, 3, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3]
    assert propose_ngram(toks, k=2, n_max=3) == [7, 8]
    assert propose_ngram([4, 5, 6], k=3) == []


def chi2(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def run_trials(p, q, n, seed):
    """Emit via verify_draft n times with drafts drawn from q; count first and second tokens."""
    g = torch.Generator().manual_seed(seed)
    first = torch.zeros(p.shape[-1])
    second = torch.zeros(p.shape[-1])
    logp, logq = p.log(), None if q is None else q.log()
    for _ in range(n):
        if q is None:
            draft = [2, 3]  # a deterministic (n-gram) draft
        else:
            draft = torch.multinomial(q, 1, replacement=True, generator=g).flatten().tolist()
        toks, lps = verify_draft(logp, draft, False, g, logq)
        first[toks[0]] += 1
        if len(toks) > 1:
            second[toks[1]] += 1
        assert abs(lps[0] - float(logp[0, toks[0]])) < 1e-6
    return first, second


def toy(seed):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(3, 5, generator=g) * 1.5, -1)
    q = torch.softmax(torch.randn(2, 5, generator=g) * 1.5, -1)
    return p, q


def test_draft_model_sampling_matches_target_distribution():
    p, q = toy(0)
    first, second = run_trials(p, q, 6000, seed=1)
    assert chi2(first, p[0]) < CHI2_DF4_P001
    assert chi2(second, p[1]) < CHI2_DF4_P001  # second token only exists if the first was accepted


def test_deterministic_draft_matches_target_distribution():
    p, _ = toy(2)
    first, second = run_trials(p, None, 6000, seed=3)
    assert chi2(first, p[0]) < CHI2_DF4_P001
    assert chi2(second, p[1]) < CHI2_DF4_P001


def test_greedy_accepts_while_argmax_agrees():
    logp = torch.log_softmax(torch.tensor([[0.0, 5, 0], [0, 0, 5], [5, 0, 0]]), -1)
    g = torch.Generator().manual_seed(0)
    assert verify_draft(logp, [1, 2], True, g)[0] == [1, 2, 0]
    assert verify_draft(logp, [1, 0], True, g)[0] == [1, 2]
