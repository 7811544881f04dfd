"""The paged engine's side of speculative decoding (EngineConfig.spec_method "ngram" or "draft"):
the draft model's runner, which tokens each decoding sequence proposes, and what a verify does
to the sequence's adaptive draft length and the engine's counters. The math (n-gram lookup,
rejection sampling) is in speculative.py; the draft model's own sampling in draft.py."""

from __future__ import annotations

from dataclasses import replace

from posttrain.engine.paged.draft import draft_budget, propose_with_draft
from posttrain.engine.paged.dtypes import cast_copy
from posttrain.engine.paged.kernel_plan import engine_plan, linear_maker
from posttrain.engine.paged.runner import ModelRunner
from posttrain.engine.paged.speculative import propose_ngram, verify_draft


def draft_runner(engine, draft_model) -> ModelRunner:
    """The draft model, in the engine's dtype on its device, run with the kernels its plan picks."""
    if draft_model is None:
        raise ValueError("spec_method='draft' needs a draft_model")
    if draft_model.config.vocab_size != engine.model.config.vocab_size:
        raise ValueError("the draft model must share the target's vocabulary")
    draft = cast_copy(draft_model.to(engine.device), engine.dtype.torch_dtype)
    plan, backend = engine_plan(engine.config, engine.dtype, draft.config, engine.device,
                                engine.options)
    return ModelRunner(draft, linear_maker(plan), plan.attention, backend[1])


def propose(engine, decodes: list, room: dict) -> dict:
    """{seq: (draft tokens, draft log-probs or None)} per decoding sequence: n-gram prompt
    lookup, or the draft model; `room`: how many tokens each may add in this step."""
    if engine.draft is not None:
        return propose_with_draft(engine, decodes, room)
    c, out = engine.config, {}
    for seq in decodes:
        k = draft_budget(engine, seq, room.get(seq, 0))
        d = propose_ngram(seq.tokens, k, c.ngram_max, c.ngram_min) if k > 0 else []
        if d:
            out[seq] = (d, None)
    return out


def verify(engine, seq, logp, draft, draft_logp) -> tuple[list[int], list[float]]:
    """The tokens and log-probs seq emits for its draft; logp: the target's rows [d + 1, V]."""
    toks, lps = verify_draft(logp, draft, seq.params.temperature <= 0, seq.generator, draft_logp)
    accepted = len(toks) - 1
    engine.stats.spec_proposed += len(draft)
    engine.stats.spec_accepted += accepted
    # propose more after a full accept, fewer after a rejection (verify compute is not free)
    seq.spec_k = (min(2 * len(draft), engine.config.spec_tokens) if accepted == len(draft)
                  else accepted + 1)
    return toks, lps


def no_logits(batch):
    """The same batch asking for no logits (the draft only needs its KV written)."""
    return replace(batch, logits_index=batch.logits_index[:0])
