"""Speculative decoding as pure functions: propose drafts, verify them by rejection sampling.

Verification follows Leviathan et al. / Chen et al. (arXiv 2211.17192, 2302.01318): with p the
target's processed distribution and q the draft's, accept draft x with probability
min(1, p(x) / q(x)); on rejection sample from norm(max(0, p - q)). The emitted tokens are then
distributed exactly as plain sampling from p. An n-gram (prompt-lookup) draft is deterministic,
so q is one-hot: accept x with probability p(x), else sample p with x removed.
"""

from __future__ import annotations

import torch


def propose_ngram(tokens: list[int], k: int, n_max: int = 4, n_min: int = 1) -> list[int]:
    """Up to k tokens that followed the latest earlier occurrence of the longest suffix n-gram."""
    size = len(tokens)
    for n in range(min(n_max, size - 1), n_min - 1, -1):
        suffix = tokens[size - n :]
        for start in range(size - n - 1, -1, -1):
            if tokens[start : start + n] == suffix:
                follow = tokens[start + n : start + n + k]
                if follow:
                    return follow
    return []


def verify_draft(
    logp: torch.Tensor,
    draft: list[int],
    greedy: bool,
    generator: torch.Generator,
    draft_logp: torch.Tensor | None = None,
) -> tuple[list[int], list[float]]:
    """Accept a prefix of draft and add one token; returns (tokens, logprobs under p).

    logp: [d+1, V] target processed log-probs at the d draft positions plus one bonus position.
    draft_logp: [d, V] the draft model's processed log-probs (None: deterministic draft).
    """
    tokens, logprobs = [], []
    for i, x in enumerate(draft):
        if greedy:
            best = int(logp[i].argmax())
            tokens.append(best)
            logprobs.append(float(logp[i, best]))
            if best != x:
                return tokens, logprobs
            continue
        p = logp[i].exp()
        q = torch.zeros_like(p) if draft_logp is None else draft_logp[i].exp()
        q_x = 1.0 if draft_logp is None else float(q[x])
        if draft_logp is None:
            q[x] = 1.0
        u = float(torch.rand((), generator=generator))
        if u * q_x < float(p[x]):  # u < p/q: accept with probability min(1, p(x)/q(x))
            tokens.append(x)
            logprobs.append(float(logp[i, x]))
            continue
        residual = (p - q).clamp(min=0)  # rejected: sample norm(max(0, p - q))
        if float(residual.sum()) <= 0:  # p == q up to rounding: any draw from p is exact
            residual = p
        y = int(torch.multinomial(residual / residual.sum(), 1, generator=generator))
        tokens.append(y)
        logprobs.append(float(logp[i, y]))
        return tokens, logprobs
    last = logp[len(draft)]
    y = int(last.argmax()) if greedy else int(torch.multinomial(last.exp(), 1, generator=generator))
    tokens.append(y)
    logprobs.append(float(last[y]))
    return tokens, logprobs
