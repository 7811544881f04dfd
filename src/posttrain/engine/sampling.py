"""Sampling as pure functions: logits -> processed log-distribution -> token, logprob.

The processed distribution is softmax(logits / T) restricted to the top-k and the top-p
nucleus and renormalised; the logprob we return is of the token under exactly that
distribution, so a trainer computing log softmax(logits / T) at the same token agrees when
top_p = 1 and top_k = 0. Greedy rows (T = 0) report the raw (T = 1) logprob, since the
processed distribution is a point mass.
"""

from __future__ import annotations

import torch


def process_logits(
    logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor, top_k: torch.Tensor
) -> torch.Tensor:
    """Log-probs of the processed distribution, -inf outside the kept set.

    logits: [B, V] float32; temperature, top_p: [B] float; top_k: [B] long (0 = off).
    """
    return torch.log_softmax(scale_logits(logits, temperature, top_p, top_k), dim=-1)


def scale_logits(
    logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor, top_k: torch.Tensor
) -> torch.Tensor:
    """logits / T with the tokens outside top-k and the top-p nucleus at -inf; [B, V]."""
    greedy = temperature <= 0
    t = torch.where(greedy, torch.ones_like(temperature), temperature)
    scaled = logits.float() / t.unsqueeze(-1)  # a new [B, V] tensor: the caller's logits stay
    return _mask_outside_kept(scaled, greedy, top_p, top_k)


def processed_logprobs_(logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor, top_k: torch.Tensor,
                        trainer_form: bool) -> torch.Tensor:
    """log_softmax(scale_logits(...)) (or the trainer's form) computed in `logits` itself, which
    the caller gives up: float32 [B, V] -> [B, V], the same bits as the out-of-place functions
    with fewer full passes and allocations (a batch-128 step has 6.3M logits): the division is
    skipped when every row's T is 1 (x / 1 = x) and the trainer's form subtracts in place."""
    greedy = temperature <= 0
    t = torch.where(greedy, torch.ones_like(temperature), temperature)
    scaled = logits.float()
    if bool((t != 1).any()):
        scaled.div_(t.unsqueeze(-1))
    scaled = _mask_outside_kept(scaled, greedy, top_p, top_k)
    if not trainer_form:
        return torch.log_softmax(scaled, dim=-1)
    return scaled.sub_(logsumexp_rows(scaled))


def logsumexp_rows(x: torch.Tensor) -> torch.Tensor:
    """torch.logsumexp(x, -1, keepdim=True) with its bits (ATen's steps: max, inf max -> 0,
    sum of exp(x - max), log + max) and one [B, V] temporary instead of two."""
    m = torch.amax(x, dim=-1, keepdim=True)
    m.masked_fill_(m.abs() == float("inf"), 0)
    return (x - m).exp_().sum(-1, keepdim=True).log_().add_(m)


def _mask_outside_kept(scaled, greedy, top_p, top_k) -> torch.Tensor:
    if bool(((top_k > 0) & ~greedy).any()):
        scaled = _mask_top_k(scaled, torch.where(greedy, torch.zeros_like(top_k), top_k))
    if bool(((top_p < 1) & ~greedy).any()):
        scaled = _mask_top_p(scaled, torch.where(greedy, torch.ones_like(top_p), top_p))
    return scaled


def trainer_log_softmax(scaled: torch.Tensor) -> torch.Tensor:
    """scaled - logsumexp(scaled), the trainer's form (train/logprobs.py), [B, V].

    Equal in exact math to log_softmax(scaled); in float32 the two round differently by up to
    an ulp of the logsumexp (~1e-5 when it is ~100), so batch-invariant engines use this one,
    and a sampled token's logprob has the trainer's bits for the same logits."""
    return scaled - torch.logsumexp(scaled, dim=-1, keepdim=True)


def _mask_top_k(scaled: torch.Tensor, top_k: torch.Tensor) -> torch.Tensor:
    """Keep each row's top_k logits (all where top_k == 0)."""
    k = torch.where(top_k > 0, top_k, torch.full_like(top_k, scaled.shape[-1]))
    k = k.clamp(max=scaled.shape[-1])
    sorted_vals = scaled.sort(dim=-1, descending=True).values
    kth = sorted_vals.gather(-1, (k - 1).unsqueeze(-1))  # [B, 1]
    return scaled.masked_fill(scaled < kth, float("-inf"))


def _mask_top_p(scaled: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches top_p (at least one)."""
    sorted_vals, order = scaled.sort(dim=-1, descending=True)
    probs = torch.softmax(sorted_vals, dim=-1)
    mass_before = probs.cumsum(-1) - probs  # mass of strictly more likely tokens
    drop_sorted = mass_before >= top_p.unsqueeze(-1)
    drop_sorted[:, 0] = False
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return scaled.masked_fill(drop, float("-inf"))


def make_generators(seed: int | None, n: int) -> list[torch.Generator]:
    """One generator per row; row i of a seeded call is reproducible whatever the batch."""
    if seed is None:
        seed = int(torch.randint(0, 2**62, (1,)).item())
    gens = []
    for i in range(n):
        g = torch.Generator()
        g.manual_seed((seed * 1_000_003 + i) % (2**63))
        gens.append(g)
    return gens


def sample_rows(
    logp: torch.Tensor, greedy: torch.Tensor, generators: list[torch.Generator]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row from processed log-probs [B, V]; returns (ids [B], logprobs [B]).

    Inverse-CDF sampling: one uniform per row from that row's generator, then one vectorised
    search over cumulative sums. A zero-probability token adds exactly 0 to the running sum,
    so it can never be the first index whose sum exceeds u * total: it is never drawn.
    Full [B, V] passes are what a large batch pays for, so each is done once, and only for
    the rows that need it (argmax for greedy rows, the cumulative sum for sampled ones).
    """
    ids = torch.empty(logp.shape[0], dtype=torch.long)
    rows = torch.nonzero(~greedy).flatten()
    if len(rows) < logp.shape[0]:
        held = torch.nonzero(greedy).flatten()
        ids[held] = (logp if len(held) == logp.shape[0] else logp[held]).argmax(dim=-1)
    if len(rows):
        sampled = logp if len(rows) == logp.shape[0] else logp[rows]
        u = torch.stack([torch.rand((), generator=generators[i]) for i in rows.tolist()])
        cdf = sampled.exp().cumsum_(-1)  # [R, V], summed in place
        pick = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True).squeeze(-1)
        ids[rows] = _clamp_to_kept(sampled, pick)
    return ids, logp.gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def _clamp_to_kept(logp: torch.Tensor, pick: torch.Tensor) -> torch.Tensor:
    """u * total may round up to total: such a pick lands past the last kept token (index V or
    a -inf token after it); move it back to the last kept one. A pick at or before the last
    kept token is never -inf (see above), so only the rows that overshot are rescanned."""
    vocab = logp.shape[-1]
    safe = pick.clamp(max=vocab - 1)
    over = (pick >= vocab) | torch.isinf(logp.gather(-1, safe.unsqueeze(-1)).squeeze(-1))
    if bool(over.any()):
        bad = torch.nonzero(over).flatten()
        kept = torch.isfinite(logp[bad]).int()
        safe[bad] = vocab - 1 - kept.flip(-1).argmax(-1)
    return safe


def row_params(params_list, device="cpu") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Stack per-row SamplingParams into (temperature [B], top_p [B], top_k [B]) tensors."""
    temp = torch.tensor([p.temperature for p in params_list], dtype=torch.float32, device=device)
    top_p = torch.tensor([p.top_p for p in params_list], dtype=torch.float32, device=device)
    top_k = torch.tensor([p.top_k for p in params_list], dtype=torch.long, device=device)
    return temp, top_p, top_k
