"""Draft-model proposals for speculative decoding (spec_method="draft").

The draft model shares the target's block tables with its own KV tensors; the engine mirrors
every target forward into it, so before a step the draft holds KV for tokens[:-1] of each
decoding sequence. Here it runs k single-token steps, sampling each draft token from its own
processed distribution q (kept for the rejection test in speculative.verify_draft).
"""

from __future__ import annotations

import torch

from posttrain.engine.paged.batching import pack
from posttrain.engine.paged.sampling import process_logits, row_params, sample_rows


def draft_budget(engine, seq, room: int) -> int:
    """How many draft tokens seq may take: step room, its adaptive k, max_tokens, context left."""
    left = min(seq.params.max_tokens - len(seq.output) - 1, engine.max_model_len - len(seq.tokens) - 1)
    return max(min(room, seq.spec_k or engine.config.spec_tokens, left), 0)


def propose_with_draft(engine, decodes: list, room: dict) -> dict:
    """{seq: (draft tokens, draft processed log-probs [d, V])} for each decoding sequence."""
    budget = {s: draft_budget(engine, s, room.get(s, 0)) for s in decodes}
    drafts = {s: [] for s in decodes if budget[s] > 0}
    logps = {s: [] for s in drafts}
    for j in range(max(budget.values(), default=0)):
        live = [s for s in drafts if len(drafts[s]) < budget[s]]
        if not live:
            break
        feeds = [(s, [s.tokens[-1] if j == 0 else drafts[s][-1]]) for s in live]
        batch, _ = pack(feeds, engine.config.block_size, engine.device, [s.num_computed + j for s in live])
        logits = engine.draft.forward(batch, engine.draft_kv)  # [len(live), V]
        temp, top_p, top_k = row_params([s.params for s in live], engine.device)
        logq = process_logits(logits, temp, top_p, top_k).cpu()  # generators live on the CPU
        ids, _ = sample_rows(logq, (temp <= 0).cpu(), [s.generator for s in live])
        for r, s in enumerate(live):
            drafts[s].append(int(ids[r]))
            logps[s].append(logq[r])
    return {s: (d, torch.stack(logps[s])) for s, d in drafts.items()}
