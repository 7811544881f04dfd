"""Paged attention in plain PyTorch: K/V are read through block tables.

Multi-token queries (prefill chunks, speculative verification) go through SDPA with a causal
and context mask. A sliding-window layer (models/windows.py) gets a plan of its own: its masks
also drop keys at or before q - window, and its decodes read only the blocks the window reaches
(no shared prefix: a window moves past it). Single-token decodes use cascade attention: sequences that share leading
blocks (a GRPO group forked from one prefill, or prefix-cache hits) read that shared prefix
once, and each sequence reads only its own suffix; the two partial softmaxes are merged by
their log-sum-exps (out = (e^{l1} o1 + e^{l2} o2) / (e^{l1} + e^{l2}) = o1 + sigmoid(l2 - l1) (o2 - o1)).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from posttrain.engine.paged.kv_cache import KVCache

MAX_SCORE_ELEMS = 1 << 26  # split long prefill chunks so one score matrix stays ~256 MB


def build_plan(q_lens, ctx_lens, tables, block_size: int, null_block: int, device, window: int | None = None) -> dict:
    """Index tensors for one step: a 'multi' SDPA group and a 'decode' cascade group; window:
    the keys a query at position q sees are those after q - window (None: all before it)."""
    starts = [0]
    for q in q_lens:
        starts.append(starts[-1] + q)
    multi = [s for s, q in enumerate(q_lens) if q > 1]
    decode = [s for s, q in enumerate(q_lens) if q == 1]
    plan = {}
    if multi:
        plan["multi"] = _multi_plan(multi, starts, q_lens, ctx_lens, tables, block_size, null_block, device, window)
    if decode:
        plan["decode"] = _decode_plan(decode, starts, ctx_lens, tables, block_size, null_block, device, window)
    return plan


def _multi_plan(seqs, starts, q_lens, ctx_lens, tables, bs, null_block, device, window) -> dict:
    qmax = max(q_lens[s] for s in seqs)
    nb = -(-max(ctx_lens[s] for s in seqs) // bs)
    tab = torch.full((len(seqs), nb), null_block, dtype=torch.long)
    tok = torch.zeros(len(seqs), qmax, dtype=torch.long)
    valid = torch.zeros(len(seqs), qmax, dtype=torch.bool)
    for r, s in enumerate(seqs):
        used = -(-ctx_lens[s] // bs)
        tab[r, :used] = torch.tensor(tables[s][:used], dtype=torch.long)
        tok[r, : q_lens[s]] = torch.arange(starts[s], starts[s] + q_lens[s])
        valid[r, : q_lens[s]] = True
    ctx = torch.tensor([ctx_lens[s] for s in seqs])
    qpos = (ctx - torch.tensor([q_lens[s] for s in seqs])).unsqueeze(-1) + torch.arange(qmax)
    keys = torch.arange(nb * bs).view(1, 1, -1)
    mask = (keys <= qpos.unsqueeze(-1)) & (keys < ctx.view(-1, 1, 1))  # [G, Qmax, L]
    if window is not None:
        mask &= keys > qpos.unsqueeze(-1) - window
    kvalid = keys.view(1, -1) < ctx.view(-1, 1)  # [G, L]
    return dict(tables=tab.to(device), tok=tok.to(device), valid=valid.to(device), mask=mask.unsqueeze(1).to(device),
                kvalid=kvalid.to(device))


def _shared_prefixes(seqs, ctx_lens, tables, bs) -> tuple[dict[int, int], list[tuple[list[int], list[int]]]]:
    """Group decodes by identical leading blocks; returns (shared blocks per seq, groups).

    A shared block must end before every member's current token, so no member writes it.
    """
    by_first: dict[int, list[int]] = {}
    for r, s in enumerate(seqs):
        if tables[s] and ctx_lens[s] > bs:
            by_first.setdefault(tables[s][0], []).append(r)
    shared, groups = {}, []
    for rows in by_first.values():
        if len(rows) < 2:
            continue
        members = [seqs[r] for r in rows]
        limit = min((ctx_lens[s] - 1) // bs for s in members)
        n = 0
        while n < limit and all(tables[s][n] == tables[members[0]][n] for s in members):
            n += 1
        if n:
            groups.append((rows, tables[members[0]][:n]))
            shared.update({r: n for r in rows})
    return shared, groups


def _decode_plan(seqs, starts, ctx_lens, tables, bs, null_block, device, window) -> dict:
    if window is None:
        shared, groups = _shared_prefixes(seqs, ctx_lens, tables, bs)
    else:  # the blocks wholly before the window are skipped, as a shared prefix's are
        shared, groups = {r: max(ctx_lens[s] - window, 0) // bs for r, s in enumerate(seqs)}, []
    own = [-(-ctx_lens[s] // bs) - shared.get(r, 0) for r, s in enumerate(seqs)]
    nb = max(own)
    tab = torch.full((len(seqs), nb), null_block, dtype=torch.long)
    first = torch.zeros(len(seqs), dtype=torch.long)
    for r, s in enumerate(seqs):
        p = shared.get(r, 0)
        tab[r, : own[r]] = torch.tensor(tables[s][p : p + own[r]], dtype=torch.long)
        first[r] = p * bs
    ctx = torch.tensor([ctx_lens[s] for s in seqs])
    keys = first.unsqueeze(-1) + torch.arange(nb * bs)
    mask = keys < ctx.unsqueeze(-1)  # [B, L]
    if window is not None:
        mask &= keys >= ctx.unsqueeze(-1) - window   # the query sits at ctx - 1
    buckets: dict[tuple[int, int], list] = {}  # equal (members, shared blocks) batch together
    for rows, blocks in groups:
        buckets.setdefault((len(rows), len(blocks)), []).append((rows, blocks))
    prefix = []
    for b in buckets.values():
        rows = [r for r, _ in b]
        whole = [r for group in rows for r in group] == list(range(len(seqs)))  # every row, in order
        prefix.append((torch.tensor(rows, device=device), torch.tensor([bl for _, bl in b], device=device), whole))
    tok = torch.tensor([starts[s] for s in seqs], device=device)
    every = starts[-1] == len(seqs)  # the step is decodes only: row r is token r
    return dict(tables=tab.to(device), mask=mask.to(device), tok=tok, prefix=prefix, all=every)


def attend(q: torch.Tensor, kv: KVCache, layer: int, plan: dict, scale: float, dtype=None) -> torch.Tensor:
    """Attention output for every packed query token; q: [N, H, D] -> [N, H, D].

    dtype=torch.float64 is exact attention (kernels/exact_attention.py): computed in float64
    and rounded once to q's dtype, so the summation order no longer shows in the result."""
    qx = q if dtype is None else q.to(dtype)
    out = torch.empty_like(qx)
    if "multi" in plan:
        _attend_multi(qx, out, kv, layer, plan["multi"], scale)
    if "decode" in plan:
        _attend_decode(qx, out, kv, layer, plan["decode"], scale)
    return out if out.dtype == q.dtype else out.to(q.dtype)


def _zero_unwritten(k, v, valid):
    """Slots past a sequence's context may hold anything (the cache is not zeroed): a NaN
    there would survive masking through 0 * NaN, so they are zeroed; valid: [B, L]."""
    drop = ~valid.view(*valid.shape, 1, 1)
    return k.masked_fill(drop, 0), v.masked_fill(drop, 0)


def _attend_multi(q, out, kv, layer, g, scale) -> None:
    k, v = _zero_unwritten(*kv.read(layer, g["tables"], q.dtype), g["kvalid"])  # [G, L, KVH, D]
    k, v = k.transpose(1, 2), v.transpose(1, 2)  # [G, KVH, L, D]
    qg = q[g["tok"]].transpose(1, 2)  # [G, H, Qmax, D]
    qmax, lmax = qg.shape[2], k.shape[2]
    step = max(1, MAX_SCORE_ELEMS // max(qg.shape[0] * qg.shape[1] * lmax, 1))
    parts = [
        F.scaled_dot_product_attention(
            qg[:, :, a : a + step], k, v, attn_mask=g["mask"][:, :, a : a + step], scale=scale, enable_gqa=True
        )
        for a in range(0, qmax, step)
    ]
    og = torch.cat(parts, dim=2).transpose(1, 2)  # [G, Qmax, H, D]
    out[g["tok"][g["valid"]]] = og[g["valid"]]


def _flash(q, k, v, scale, bias=None) -> tuple[torch.Tensor, torch.Tensor]:
    """ATen's fused CPU attention (the kernel SDPA itself runs), which also returns the row
    log-sum-exps: q [B, KVH, M, D] (M queries per KV head: GQA heads as query rows); k, v
    [B, KVH, L, D], strided views of the gathered cache (no copies); bias [B, 1, 1, L] additive
    (0 or -inf) -> (out [B, KVH, M, D], lse [B, KVH, M]). A masked slot gets weight exactly 0;
    its V may hold any finite value (the cache holds zeros or earlier sequences' K/V)."""
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False, attn_mask=bias,
                                                                           scale=scale)[:2]
    return out, lse


def _decode_bias(g: dict, dtype) -> torch.Tensor:
    """The step's own-blocks mask as an additive [B, 1, 1, L] bias in `dtype`, made once per step."""
    key = ("bias", dtype)
    if key not in g:
        b, length = g["mask"].shape
        bias = torch.zeros(b, 1, 1, length, dtype=dtype, device=g["mask"].device)
        g[key] = bias.masked_fill_(~g["mask"].view(b, 1, 1, length), float("-inf"))
    return g[key]


def _attend_decode(q, out, kv, layer, g, scale) -> None:
    qd = q if g["all"] else q[g["tok"]]  # [B, H, D]
    b, h, d = qd.shape
    k, v = kv.read(layer, g["tables"], q.dtype)  # [B, L, KVH, D]
    kvh = k.shape[2]
    o, lse = _flash(qd.view(b, kvh, h // kvh, d), k.transpose(1, 2), v.transpose(1, 2), scale, _decode_bias(g, q.dtype))
    o, lse = o.reshape(b, h, d), lse.reshape(b, h)  # each sequence's own blocks
    for rows, blocks, whole in g["prefix"]:  # rows [NG, G], blocks [NG, NP]: shared prefixes, read once
        pick = (lambda x: x.view(*rows.shape, *x.shape[1:])) if whole else (lambda x: x[rows])  # noqa: E731
        kp, vp = kv.read(layer, blocks, q.dtype)  # [NG, Lp, KVH, D], every slot written
        op, lp = _attend_shared(pick(qd), kp.transpose(1, 2), vp.transpose(1, 2), scale)
        # the prefix's share of the merged softmax mass: e^lp / (e^lp + e^lse) = sigmoid(lp - lse)
        share = torch.sigmoid(lp - pick(lse)).unsqueeze(-1)  # float32 lse for a bf16 q: merged in float32
        merged = torch.lerp(pick(o).to(share.dtype), op.to(share.dtype), share).to(o.dtype)
        if whole:  # one bucket holds every row: no scatter back
            o = merged.view(b, h, d)
        else:
            o[rows] = merged
    if g["all"]:
        out.copy_(o)
    else:
        out[g["tok"]] = o


class TorchAttention:
    """This module as the runner's attention interface: plan once per step, attend per layer
    (dtype=torch.float64: exact attention; vllm_attention.py is the other implementation).
    windows: each layer's sliding window or None (models/windows.py); one plan per distinct one."""

    def __init__(self, dtype: torch.dtype | None = None, windows: list[int | None] | None = None):
        self.dtype = dtype
        self.windows = windows

    def plan(self, batch, kv: KVCache, device) -> dict:
        args = (batch.q_lens, batch.ctx_lens, batch.block_tables, kv.block_size, kv.null_block, device)
        if not self.windows:
            return build_plan(*args)
        return {"by_window": {w: build_plan(*args, window=w) for w in set(self.windows)}}

    def attend(self, q: torch.Tensor, kv: KVCache, layer: int, plan: dict, scale: float) -> torch.Tensor:
        if "by_window" in plan:
            plan = plan["by_window"][self.windows[layer]]
        return attend(q, kv, layer, plan, scale, self.dtype)


def _attend_shared(q, k, v, scale) -> tuple[torch.Tensor, torch.Tensor]:
    """Groups of G queries [NG, G, H, D] over their shared K/V [NG, KVH, L, D] -> out [NG, G, H, D], lse [NG, G, H]."""
    ng, g, h, d = q.shape
    kvh = k.shape[1]
    qg = q.view(ng, g, kvh, h // kvh, d).transpose(1, 2).reshape(ng, kvh, g * (h // kvh), d)
    o, lse = _flash(qg, k, v, scale)  # [NG, KVH, G * H/KVH, D]
    o = o.reshape(ng, kvh, g, h // kvh, d).transpose(1, 2).reshape(ng, g, h, d)
    return o, lse.reshape(ng, kvh, g, h // kvh).transpose(1, 2).reshape(ng, g, h)
