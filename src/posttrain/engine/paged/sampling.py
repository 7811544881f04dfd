"""Sampling: logits -> processed distribution (temperature, top-k, top-p) -> token, logprob.

The processed distribution is softmax(logits / T) restricted to the top-k and the top-p
nucleus and renormalised; the logprob we return is of the token under exactly that
distribution, so a trainer computing log softmax(logits / T) at the same token agrees when
top_p = 1 and top_k = 0. Greedy rows (T = 0) report the raw (T = 1) logprob, since the
processed distribution is a point mass.
"""

from __future__ import annotations

import torch

CHUNK = 1024  # the sampler's first level: sums of this many weights


def process_logits(
    logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor, top_k: torch.Tensor
) -> torch.Tensor:
    """Log-probs of the processed distribution, -inf outside the kept set.

    logits: [B, V] float32; temperature, top_p: [B] float; top_k: [B] long (0 = off).
    """
    return torch.log_softmax(scale_logits(logits, temperature, top_p, top_k), dim=-1)


def scale_logits(
    logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor, top_k: torch.Tensor, in_place: bool = False
) -> torch.Tensor:
    """logits / T with the tokens outside top-k and the top-p nucleus at -inf; [B, V].
    in_place: computed in float32 `logits` itself (the same bits; a T = 1 batch skips the division)."""
    greedy = temperature <= 0
    t = torch.where(greedy, torch.ones_like(temperature), temperature).unsqueeze(-1)
    if not in_place:
        scaled = logits.float() / t  # a new [B, V] tensor: the caller's logits stay
    elif bool((t != 1).any()):
        scaled = logits.float().div_(t)
    else:
        scaled = logits.float()
    return _mask_outside_kept(scaled, greedy, top_p, top_k)


class Processed:
    """One step's processed distributions, computed in the step's logits themselves.

    scaled: logits / T with the tokens outside the kept set at -inf; lse: its row log-sum-exps
    (torch.logsumexp's bits); weights: exp(scaled - row max), the unnormalised probabilities the
    sampler draws from. A row's log-probs are scaled - lse, the trainer's form (train/logprobs.py),
    so a sampled token's logprob has the trainer's bits for the same logits (log_softmax rounds
    differently, by up to an ulp of the log-sum-exp: ~1e-5 when it is ~100); full rows are made
    only where they are asked for (speculative verification, top logprobs), not for the batch.
    """

    def __init__(self, logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor, top_k: torch.Tensor):
        self.scaled = scale_logits(logits, temperature, top_p, top_k, in_place=True)
        self.greedy = temperature <= 0
        self.weights, self.lse = _exp_and_logsumexp(self.scaled)

    def logp(self, start: int, stop: int) -> torch.Tensor:
        """Processed log-probs of rows [start, stop): [R, V]."""
        return self.scaled[start:stop] - self.lse[start:stop]

    def sample(self, rows: list[int], generators: list[torch.Generator]) -> tuple[torch.Tensor, torch.Tensor]:
        """One token per listed row (greedy rows: the argmax); returns (ids [R], logprobs [R]).
        Spends the weights: they are summed in place, so call this once per step."""
        every = rows == list(range(self.scaled.shape[0]))
        pick = (lambda x: x) if every else (lambda x: x[rows])
        scaled, greedy = pick(self.scaled), pick(self.greedy)
        ids = _draw(pick(self.weights), scaled, greedy, generators)
        return ids, scaled.gather(-1, ids.unsqueeze(-1)).squeeze(-1) - pick(self.lse).squeeze(-1)


def _exp_and_logsumexp(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(exp(x - row max) [B, V], logsumexp [B, 1]) in ATen's steps for logsumexp (max, an
    infinite max taken as 0, sum of exp(x - max), log + max), so the second has its bits."""
    m = torch.amax(x, dim=-1, keepdim=True)
    m.masked_fill_(m.abs() == float("inf"), 0)
    weights = (x - m).exp_()
    return weights, weights.sum(-1, keepdim=True).log_().add_(m)


def _mask_outside_kept(scaled, greedy, top_p, top_k) -> torch.Tensor:
    if bool(((top_k > 0) & ~greedy).any()):
        scaled = _mask_top_k(scaled, torch.where(greedy, torch.zeros_like(top_k), top_k))
    if bool(((top_p < 1) & ~greedy).any()):
        scaled = _mask_top_p(scaled, torch.where(greedy, torch.ones_like(top_p), top_p))
    return scaled


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


def make_generators(seed: int | None, n: int, streams: list[int] | None = None) -> list[torch.Generator]:
    """One generator per row, on its stream of the seed (row i's: streams[i], or i): a row's
    samples depend on the seed and its stream only, never on the other rows of the batch."""
    if seed is None:
        seed = int(torch.randint(0, 2**62, (1,)).item())
    gens = []
    for i in (range(n) if streams is None else streams):
        g = torch.Generator()
        g.manual_seed((seed * 1_000_003 + i) % (2**63))
        gens.append(g)
    return gens


def sample_rows(
    logp: torch.Tensor, greedy: torch.Tensor, generators: list[torch.Generator]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row from processed log-probs [B, V]; returns (ids [B], logprobs [B])."""
    ids = _draw(logp.exp(), logp, greedy, generators)
    return ids, logp.gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def _draw(weights: torch.Tensor, scores: torch.Tensor, greedy: torch.Tensor, generators) -> torch.Tensor:
    """Token ids [B]: argmax of scores for greedy rows, else a draw from weights [B, V]
    (unnormalised probabilities, 0 outside the kept set; summed in place).

    Inverse-CDF sampling: one uniform per row from that row's generator, then one vectorised
    search over cumulative sums. A zero-probability token adds exactly 0 to the running sum,
    so it can never be the first index whose sum exceeds u * total: it is never drawn.
    Full [B, V] passes are what a large batch pays for, so each is done once, and only for
    the rows that need it (argmax for greedy rows, the cumulative sum for sampled ones).
    """
    ids = torch.empty(scores.shape[0], dtype=torch.long, device=scores.device)
    rows = torch.nonzero(~greedy).flatten()
    if len(rows) < scores.shape[0]:
        held = torch.nonzero(greedy).flatten()
        ids[held] = (scores if len(held) == scores.shape[0] else scores[held]).argmax(dim=-1)
    if len(rows):
        every = len(rows) == scores.shape[0]
        # the uniforms come from the rows' CPU generators on any device: a seed draws alike on each
        u = torch.stack([torch.rand((), generator=generators[i]) for i in rows.tolist()]).to(scores.device)
        pick = _inverse_cdf(weights if every else weights[rows], u)
        ids[rows] = _clamp_to_kept(scores if every else scores[rows], pick)
    return ids


def _inverse_cdf(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The first index of each row where the running sum of weights [R, V] exceeds u * total.

    Two levels, so no full-row cumulative sum (a sequential pass): sum chunks of CHUNK, find the
    chunk, then search the running sum inside that chunk alone. Within the chunk the pick stops
    at its last nonzero weight, so rounding between the two levels never moves it into the next
    chunk; a zero weight is still never the first to exceed (see _draw)."""
    r, v = weights.shape
    n = -(-v // CHUNK)
    if n < 2:
        cdf = weights.cumsum_(-1)
        return torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True).squeeze(-1)
    full = (v // CHUNK) * CHUNK
    sums = weights[:, :full].view(r, -1, CHUNK).sum(-1)
    if full < v:
        sums = torch.cat([sums, weights[:, full:].sum(-1, keepdim=True)], dim=-1)
    cum = sums.cumsum(-1)  # [R, n]
    target = (u * cum[:, -1]).unsqueeze(-1)
    chunk = torch.searchsorted(cum, target, right=True).clamp_(max=n - 1)  # [R, 1]
    before = torch.where(chunk > 0, cum.gather(-1, (chunk - 1).clamp(min=0)), torch.zeros_like(target))
    idx = chunk * CHUNK + torch.arange(CHUNK, device=weights.device)  # [R, CHUNK]; the last chunk may be short
    inner = weights.gather(-1, idx.clamp(max=v - 1)).masked_fill_(idx >= v, 0)
    last = CHUNK - 1 - (inner > 0).flip(-1).int().argmax(-1, keepdim=True)
    pos = torch.searchsorted(inner.cumsum_(-1), target - before, right=True)
    return (chunk * CHUNK + torch.minimum(pos, last)).squeeze(-1)


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
