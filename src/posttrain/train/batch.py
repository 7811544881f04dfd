"""Episodes → right-padded training tensors."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from posttrain.types import Episode


@dataclass
class Batch:
    input_ids: torch.Tensor       # [B, T] long
    attention_mask: torch.Tensor  # [B, T] long
    loss_mask: torch.Tensor       # [B, T] float, 1 where the model sampled the token
    old_logprobs: torch.Tensor    # [B, T] float, the sampler's logprobs (0 where masked out)
    advantages: torch.Tensor      # [B] float
    routing: torch.Tensor | None = None  # [B, T, L, k] long, the engine's experts (MoE), -1 where none

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def to(self, device: torch.device) -> "Batch":
        """The batch on the model's device (the same object where it is there already)."""
        if self.input_ids.device == device:
            return self
        return Batch(*(None if t is None else t.to(device) for t in (
            self.input_ids, self.attention_mask, self.loss_mask, self.old_logprobs, self.advantages, self.routing)))


def _padded(rows: list[list], width: int, fill) -> list[list]:
    return [r + [fill] * (width - len(r)) for r in rows]


def right_pad(seqs: list[list[int]], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Token lists → (ids [B, T] right-padded with pad_id, attention mask [B, T])."""
    width = max(map(len, seqs))
    ids = torch.tensor(_padded(seqs, width, pad_id), dtype=torch.long)
    mask = torch.tensor(_padded([[1] * len(s) for s in seqs], width, 0), dtype=torch.long)
    return ids, mask


def collate(episodes: list[Episode], pad_id: int, advantages: list[float] | None = None) -> Batch:
    ids, attn = right_pad([e.tokens for e in episodes], pad_id)
    width = ids.shape[1]
    mask = torch.tensor(_padded([e.loss_mask for e in episodes], width, 0), dtype=torch.float)
    old = torch.tensor(_padded([e.logprobs for e in episodes], width, 0.0), dtype=torch.float)
    adv = torch.tensor(advantages if advantages is not None else [0.0] * len(episodes), dtype=torch.float)
    return Batch(ids, attn, mask, old, adv, _routing(episodes, width))


def by_segment(episodes: list[Episode], advantages: list[float]) -> tuple[list[Episode], list[float]]:
    """One training row per stream the engine saw: an episode whose context policy rewrote
    its prompt (Episode.segments) becomes several rows, each with the episode's advantage, so
    every sampled token is trained once, behind exactly the prompt it was sampled after (an MoE
    episode's routing covers its first stream only, so rewritten segments carry none)."""
    rows, adv = [], []
    for e, a in zip(episodes, advantages):
        for s in e.streams():
            if any(s.loss_mask):
                rows.append(e if not e.segments else replace(
                    e, tokens=s.tokens, loss_mask=s.loss_mask, logprobs=s.logprobs,
                    versions=s.versions, prompt_len=s.prompt_len, segments=[], routing=None))
                adv.append(a)
    return rows, adv


def _routing(episodes: list[Episode], width: int) -> torch.Tensor | None:
    """Episodes' engine routing as [B, T, L, k] (-1 past each one's routed prefix); None when none has any."""
    shaped = [e.routing for e in episodes if e.routing]
    if not shaped:
        return None
    layers, k = len(shaped[0][0]), len(shaped[0][0][0])
    out = torch.full((len(episodes), width, layers, k), -1, dtype=torch.long)
    for i, e in enumerate(episodes):
        if e.routing:
            out[i, :len(e.routing)] = torch.tensor(e.routing, dtype=torch.long)
    return out
