"""Packing one scheduled step into a runner Batch, and appending sampled tokens to sequences."""

from __future__ import annotations

import torch

from posttrain.engine.paged.runner import Batch
from posttrain.engine.paged.sequence import Sequence


def pack(feeds, block_size: int, device, starts: list[int] | None = None) -> tuple[Batch, list[list[int]]]:
    """Batch for feeding each sequence its tokens at positions start.. (default num_computed);
    returns the Batch and, per sequence, the packed rows whose next-token logits are needed
    (those at or past the sequence's last real token: none for a prefill chunk that stops short)."""
    ids, positions, slots, q_lens, ctx_lens, tables, rows = [], [], [], [], [], [], []
    row = 0
    for i, (seq, feed) in enumerate(feeds):
        start = seq.num_computed if starts is None else starts[i]
        table = seq.block_table
        for j, tok in enumerate(feed):
            pos = start + j
            ids.append(tok)
            positions.append(pos)
            slots.append(table[pos // block_size] * block_size + pos % block_size)
        first = max(len(seq.tokens) - 1 - start, 0)
        rows.append(list(range(row + first, row + len(feed))))
        q_lens.append(len(feed))
        ctx_lens.append(start + len(feed))
        tables.append(table)
        row += len(feed)
    flat = [r for rs in rows for r in rs]
    batch = Batch(
        input_ids=torch.tensor(ids, dtype=torch.long, device=device),
        positions=torch.tensor(positions, dtype=torch.long, device=device),
        slots=torch.tensor(slots, dtype=torch.long, device=device),
        q_lens=q_lens,
        ctx_lens=ctx_lens,
        block_tables=tables,
        logits_index=torch.tensor(flat, dtype=torch.long, device=device),
    )
    return batch, rows


def append_tokens(seq: Sequence, tokens: list[int], logprobs: list[float], max_model_len: int, tokenizer=None) -> None:
    """Append sampled tokens one by one, stopping at a stop id, max_tokens or the context end."""
    p = seq.params
    for tok, lp in zip(tokens, logprobs):
        seq.tokens.append(tok)
        seq.logprobs.append(lp)
        if tok in p.stop_token_ids:
            seq.finish_reason = "stop"
        elif p.stop and tokenizer is not None and _hits_stop_string(seq, tokenizer):
            seq.finish_reason = "stop"
        elif len(seq.output) >= p.max_tokens or len(seq.tokens) >= max_model_len:
            seq.finish_reason = "length"
        if seq.finished:
            return


def _hits_stop_string(seq: Sequence, tokenizer) -> bool:
    """Does the decoded output end inside a window that contains a stop string?"""
    longest = max(len(s) for s in seq.params.stop)
    tail = tokenizer.decode(seq.output[-(longest + 8) :], skip_special_tokens=False)
    return any(s in tail for s in seq.params.stop)
