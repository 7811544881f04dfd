"""Passkey retrieval past the training length (issue 32): a tiny Llama trained at 512 tokens, then
read at 2,048 with no rope scaling, with PI (linear) and with YaRN (models/rope.py), each scaled
model tuned for a few steps at the long length first.

A sample: <bos> filler... <key> D D D D D filler... <query> <key> -> D D D D D. Filler tokens are
drawn at random from their own set; the five digits are distinct, so copying them is an induction
pattern (find the earlier copy of the current token, emit what followed it). Accuracy: all five
digits right under greedy decoding; with teacher forcing that is every answer position's argmax
being its digit (a wrong digit ends the greedy match either way). At the long length the key sits
in the first 72% of the filler, so it is more than 560 tokens before the query.
"""

from __future__ import annotations

import copy
import math
import random

import torch
import torch.nn.functional as F

from posttrain.models.rope import with_rope_scaling
from posttrain.models.tiny import build_tiny_model

PAD, BOS, KEY, QUERY = 0, 1, 12, 13
DIGITS = list(range(2, 12))
FILLER = list(range(14, 46))
VOCAB = 46
N_DIGITS = 5
MODEL = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
             intermediate_size=256)
TAIL = 2 + N_DIGITS  # <query> <key> and the answer


def sample(rng: random.Random, length: int, depth: float) -> list[int]:
    """One sequence of `length` tokens, its key block at `depth` (0..1) of the filler."""
    digits = rng.sample(DIGITS, N_DIGITS)
    filler = length - 1 - (1 + N_DIGITS) - TAIL
    before = round(depth * filler)
    body = [rng.choice(FILLER) for _ in range(filler)]
    return [BOS] + body[:before] + [KEY] + digits + body[before:] + [QUERY, KEY] + digits


def batch(rng: random.Random, n: int, length: int, depths: tuple[float, float]) -> torch.Tensor:
    return torch.tensor([sample(rng, length, rng.uniform(*depths)) for _ in range(n)])


def answer_logits(model, ids: torch.Tensor) -> torch.Tensor:
    """[B, 5, V]: the logits that predict each answer digit."""
    logits = model(input_ids=ids[:, :-1]).logits
    return logits[:, -N_DIGITS:]


def loss_of(model, ids: torch.Tensor) -> torch.Tensor:
    logits = answer_logits(model, ids)
    return F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, -N_DIGITS:].reshape(-1))


def train(model, steps: int, lengths: tuple[int, ...], tokens: int, lr: float, seed: int,
          log_every: int = 50) -> list:
    """AdamW for `steps`, each on one of `lengths` (drawn at random) with tokens // length samples
    of it; a short warm-up, then cosine decay. Returns [(step, length, loss)] every log_every steps."""
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    warm = max(steps // 20, 1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, 0.5 * (1 + math.cos(math.pi * s / steps))))
    model.train()
    log = []
    for step in range(steps):
        length = rng.choice(lengths)
        loss = loss_of(model, batch(rng, max(tokens // length, 1), length, (0.0, 1.0)))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0 or step == steps - 1:
            log.append((step, length, round(loss.item(), 4)))
            print(f"    step {step:4d} length {length} loss {loss.item():.4f}", flush=True)
    model.eval()
    return log


@torch.no_grad()
def accuracy_by_depth(model, length: int, per_bucket: int, buckets: list[tuple[float, float]], seed: int,
                      chunk: int = 8) -> dict:
    """{"lo-hi%": exact-match share} per depth bucket of the key, and "all"."""
    rng = random.Random(seed)
    out, hits_all = {}, 0
    for lo, hi in buckets:
        hits = 0
        for start in range(0, per_bucket, chunk):
            ids = batch(rng, min(chunk, per_bucket - start), length, (lo, hi))
            pred = answer_logits(model, ids).argmax(-1)
            hits += int((pred == ids[:, -N_DIGITS:]).all(-1).sum())
        out[f"{lo * 100:.0f}-{hi * 100:.0f}%"] = hits / per_bucket  # no dots: the headline test's paths
        hits_all += hits
    out["all"] = hits_all / (per_bucket * len(buckets))
    return out


def build(train_len: int, seed: int):
    return build_tiny_model(VOCAB, seed=seed, max_position_embeddings=train_len, **MODEL)


def scaled_copy(model, kind: str, factor: float, original_max: int):
    """A copy of the model with rope scaling `kind` (models/rope.py); "none": the plain rope,
    max_position_embeddings raised to the long length."""
    twin = copy.deepcopy(model)
    return with_rope_scaling(twin, kind, factor, original_max)


@torch.no_grad()
def engine_accuracy(model, length: int, n: int, depths: tuple[float, float], seed: int) -> dict:
    """Greedy retrieval through the embedded engine (engine/paged), on the same kind of samples:
    its exact-match share and the share of samples where its verdict (all digits right or not) is
    the HF forward's."""
    from posttrain.engine.base import SamplingParams
    from posttrain.engine.paged.config import EngineConfig
    from posttrain.engine.paged.local import LocalEngine

    ids = batch(random.Random(seed), n, length, depths)
    engine = LocalEngine(model, config=EngineConfig(max_num_seqs=n))
    outs = engine.generate([row[:-N_DIGITS].tolist() for row in ids],
                           SamplingParams(temperature=0.0, max_tokens=N_DIGITS))
    got = (torch.tensor([o.token_ids for o in outs]) == ids[:, -N_DIGITS:]).all(-1)
    hf = (answer_logits(model, ids).argmax(-1) == ids[:, -N_DIGITS:]).all(-1)
    return {"acc": float(got.float().mean()), "agrees_with_hf": float((got == hf).float().mean()), "n": n}
