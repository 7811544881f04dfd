"""Log-probabilities and entropies of chosen tokens from the final hidden states and the
output embedding, in chunks of tokens: the [tokens x vocab] logits never exist whole, in the
forward or the backward (each chunk's logits are recomputed in backward).

For one token with logits z = h W^T / T, p = softmax(z), y the chosen token:
    logp_y = z_y - logsumexp(z)                 d logp_y / dz = onehot(y) - p
    H = -sum_j p_j log p_j                      dH / dz_j = -p_j (log p_j + H)
so dL/dz = g_lp (onehot(y) - p) - g_H p (log p + H), and dL/dh = dL/dz W / T,
dL/dW = (dL/dz)^T h / T, accumulated chunk by chunk. A tied output embedding (SmolLM2's
lm_head is embed_tokens) is one parameter: autograd adds this gradient to the embedding's.

The trainer takes a `ChunkedHead` (OptimConfig.logprob_chunk > 0) and the forwards of
train/logprobs.py, prefix.py and packed.py then stop at the final hidden states.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def _chunk_logprobs(h: torch.Tensor, weight: torch.Tensor, temperature: float) -> torch.Tensor:
    """log softmax(h W^T / T) of one chunk, [c, V] float32 (bf16 matmul under autocast)."""
    z = (h @ weight.t()).float()
    if temperature != 1.0:
        z = z / temperature
    return z.sub_(z.logsumexp(-1, keepdim=True))


class ChunkedLogprobs(torch.autograd.Function):
    """(logp [N], entropy [N]) of targets [N] under softmax(hidden [N, H] @ weight [V, H]^T / T)."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, hidden, weight, targets, temperature: float, chunk: int):
        lp = torch.empty(len(hidden), dtype=torch.float32, device=hidden.device)
        ent = torch.empty(len(hidden), dtype=torch.float32, device=hidden.device)
        for s in range(0, len(hidden), chunk):
            logp = _chunk_logprobs(hidden[s:s + chunk], weight, temperature)
            lp[s:s + chunk] = logp.gather(1, targets[s:s + chunk, None]).squeeze(1)
            ent[s:s + chunk] = -(logp.exp() * logp).sum(-1)
        ctx.save_for_backward(hidden, weight, targets, ent)
        ctx.temperature, ctx.chunk = temperature, chunk
        return lp, ent

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g_lp, g_ent):
        hidden, weight, targets, ent = ctx.saved_tensors
        t, chunk = ctx.temperature, ctx.chunk
        grad_h = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if ctx.needs_input_grad[1] else None
        for s in range(0, len(hidden), chunk):
            h, e = hidden[s:s + chunk], slice(s, s + chunk)
            logp = _chunk_logprobs(h, weight, t)
            p = logp.exp()
            # dL/dz = -p (g_lp + g_H (log p + H)) + g_lp onehot(y), built in place
            gz = p.mul_(logp.add_(ent[e, None]).mul_(g_ent[e, None]).add_(g_lp[e, None])).neg_()
            del logp
            gz.scatter_add_(1, targets[e, None], g_lp[e, None].to(gz.dtype))
            if t != 1.0:
                gz.div_(t)
            if grad_h is not None:
                grad_h[e] = (gz @ weight.to(gz.dtype)).to(hidden.dtype)
            if grad_w is not None:
                grad_w.addmm_(gz.t(), h.to(gz.dtype))
        return grad_h, None if grad_w is None else grad_w.to(weight.dtype), None, None, None


def chunked_logprobs(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                     temperature: float = 1.0, chunk: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
    """(logp [N], entropy [N]) float32, computed `chunk` tokens at a time (module docstring)."""
    return ChunkedLogprobs.apply(hidden, weight, targets, temperature, chunk)


def plain_logprobs(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                   temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The same numbers with the full [N, V] logits: what chunked_logprobs is tested against."""
    logp = torch.log_softmax((hidden @ weight.t()).float() / temperature, dim=-1)
    return logp.gather(1, targets[:, None]).squeeze(1), -(logp.exp() * logp).sum(-1)


@dataclass(frozen=True)
class ChunkedHead:
    """The trainer's output head over final hidden states: logp of each target, [M] float32."""

    chunk: int

    def __call__(self, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                 temperature: float) -> torch.Tensor:
        return chunked_logprobs(hidden, weight, targets, temperature, self.chunk)[0]


def head_logprobs(head, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                  valid: torch.Tensor, temperature: float) -> torch.Tensor:
    """[N, L] logprobs of targets [N, L] from hidden [N, L, H] where valid, 0 elsewhere; the
    head sees only the valid rows."""
    keep = valid.bool()
    out = torch.zeros(keep.shape, dtype=torch.float32, device=hidden.device)
    out[keep] = head(hidden[keep], weight, targets[keep], temperature)
    return out
