"""Episodes → right-padded training tensors."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from posttrain.types import Episode


@dataclass
class Batch:
    input_ids: torch.Tensor       # [B, T] long
    attention_mask: torch.Tensor  # [B, T] long
    loss_mask: torch.Tensor       # [B, T] float, 1 where the model sampled the token
    old_logprobs: torch.Tensor    # [B, T] float, the sampler's logprobs (0 where masked out)
    advantages: torch.Tensor      # [B] float

    def __len__(self) -> int:
        return self.input_ids.shape[0]


def right_pad(seqs: list[list[int]], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Token lists → (ids [B, T] right-padded with pad_id, attention mask [B, T])."""
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


def collate(episodes: list[Episode], pad_id: int, advantages: list[float] | None = None) -> Batch:
    ids, attn = right_pad([e.tokens for e in episodes], pad_id)
    B, T = ids.shape
    mask = torch.zeros((B, T))
    old = torch.zeros((B, T))
    for i, e in enumerate(episodes):
        n = len(e.tokens)
        mask[i, :n] = torch.tensor(e.loss_mask, dtype=torch.float)
        old[i, :n] = torch.tensor(e.logprobs)
    adv = torch.tensor(advantages if advantages is not None else [0.0] * B, dtype=torch.float)
    return Batch(ids, attn, mask, old, adv)
