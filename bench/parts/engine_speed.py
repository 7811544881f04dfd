"""Decode speed against the machine's own matmul bound, and bf16 against fp32 (bench/engine.py).

The bound is measured in the same run on the same engine: every linear of one decode step
(the same packed weights and kernels, random inputs of the batch's row count) is timed
alone; bound tok/s = batch / (the sum of those times). A step's attention, sampling and
Python are what separate the engine from it.

Batch 1 is held to memory bandwidth too: one token reads every weight once (and its context's
K/V), so the bound is bandwidth / bytes per token, with bandwidth measured in the same run (the
best of 5 sums over a 1 GiB float32 buffer on this thread: a streaming read, as a GEMV's is; on
4 KB pages and on huge pages, where the decode GEMVs keep their weights, the faster of the two).
A batch-1 row also splits its step (`batch1_split`): the weight stream alone (every linear's
GEMV kernel called back to back on its packed weights, nothing else: the most any step of this
engine could reach), the linears as the layers call them, attention, and the rest.
"""

from __future__ import annotations

import time

import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.local import LocalEngine
from posttrain.kernels import gemv
from posttrain.kernels.packed import best_seconds
from posttrain.train.logprobs import token_logprobs


def random_prompts(n: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(20, vocab - 1, (length,), generator=g).tolist() for _ in range(n)]


@torch.inference_mode()
def matmul_bound_s(engine: LocalEngine, batch: int, repeat: int = 3) -> float:
    """Seconds per decode step spent in the step's linears alone (best of `repeat`)."""
    runner = engine.runner
    calls = [lin for layer in runner.linears for lin in layer.values()]
    width = {lin: lin.sources[0].in_features for lin in calls}
    inputs = {w: torch.randn(batch, w).to(runner.dtype) for w in width.values()}
    best = float("inf")
    for _ in range(repeat):
        for lin in calls:  # warm: packs weights, builds kernels
            lin(inputs[width[lin]])
        t0 = time.perf_counter()
        for lin in calls:
            lin(inputs[width[lin]])
        best = min(best, time.perf_counter() - t0)
    return best


@torch.inference_mode()
def decode_row(model, dtype: str, batch: int, prompt_len: int, steps: int, **config) -> dict:
    """Decode tok/s at `batch` rows (groups of 8 share a prompt, as in GRPO) vs the bound;
    `config`: more EngineConfig fields (batch_invariant, weights)."""
    group = 8 if batch >= 8 else 1
    prompts = random_prompts(batch // group, prompt_len, model.config.vocab_size, 7)
    engine = LocalEngine(model, config=EngineConfig(dtype=dtype, **config))
    params = SamplingParams(temperature=1.0, max_tokens=2 * steps + 2, seed=0)  # steps more for step_split
    engine.add([p for p in prompts for _ in range(group)], params)
    while any(s.num_to_compute > 1 for s in engine.scheduler.running) or engine.scheduler.waiting:
        engine.step()  # prefill (and the first token)
    engine.step()  # one warm decode step
    t0 = time.perf_counter()
    for _ in range(steps):
        engine.step()
    step_s = (time.perf_counter() - t0) / steps
    bound_s = matmul_bound_s(engine, batch)
    ctx = prompt_len + steps + 2
    gemv = any(lin.gemv is not None for layer in engine.runner.linears for lin in layer.values())
    row = {"dtype": engine.dtype.name, "weights": engine.config.weights, "batch": batch,
           "attention": engine.attention_backend[0], "gemm": engine.gemm, "gemv_few_rows": gemv,
           "decode_tok_s": batch / step_s, "step_ms": step_s * 1e3, "matmul_bound_tok_s": batch / bound_s,
           "of_bound": bound_s / step_s, "bytes_per_token": step_weight_bytes(engine) + ctx * kv_token_bytes(engine)}
    if batch == 1 and gemv:
        row["batch1_split"] = step_split(engine, steps, step_s, bound_s)
    return row


@torch.inference_mode()
def step_split(engine: LocalEngine, steps: int, step_s: float, linears_s: float) -> dict:
    """Where a batch-1 step's milliseconds go: the weight stream alone (each linear's GEMV on its
    packed weights, back to back, best of 5), the linears through the layers' objects (linears_s),
    attention (timed inside `steps` more real steps) and the rest (glue, sampling, scheduling, Python)."""
    calls = [lin for layer in engine.runner.linears for lin in layer.values()]
    xs = [torch.randn(1, lin.sources[0].in_features).to(engine.runner.dtype) for lin in calls]
    stream_s = best_seconds(lambda: [lin.gemv(x) for lin, x in zip(calls, xs)])
    attention = engine.runner.attention
    attend, spent = attention.attend, [0.0]

    def timed(*args):
        t0 = time.perf_counter()
        out = attend(*args)
        spent[0] += time.perf_counter() - t0
        return out

    attention.attend = timed
    try:
        for _ in range(steps):
            engine.step()
    finally:
        del attention.attend  # the bound method again
    attention_s = spent[0] / steps
    return {"weight_stream_ms": stream_s * 1e3, "linears_ms": linears_s * 1e3, "attention_ms": attention_s * 1e3,
            "rest_ms": (step_s - linears_s - attention_s) * 1e3}


def step_weight_bytes(engine: LocalEngine) -> int:
    """Bytes of weights one decode step reads: every linear once (int8 ones: their int8 weights and scales)."""
    total = 0
    for layer in engine.runner.linears:
        for lin in layer.values():
            parts = lin.int8 if getattr(lin, "int8", None) is not None else (lin.weight,)
            total += sum(t.numel() * t.element_size() for t in parts)
    return total


def kv_token_bytes(engine: LocalEngine) -> int:
    r = engine.runner
    return 2 * r.num_layers * r.num_kv_heads * r.head_dim * engine.kv.kv.element_size()


def read_rates_gbs(mib: int = 1024, repeat: int = 5) -> dict:
    """GB/s of one thread streaming through a buffer much larger than any cache (best of repeat):
    on the usual 4 KB pages, and on transparent huge pages where the decode GEMVs' module is built
    (the engine keeps their packed weights there). The bound takes the faster."""
    rates = {"4k_pages": _sum_gbs(torch.ones(mib * 2**20 // 4), repeat)}
    if gemv.module() is not None:
        rates["huge_pages"] = _sum_gbs(gemv.module().huge_bytes(mib * 2**20).view(torch.float32).fill_(1), repeat)
    return rates


def _sum_gbs(x: torch.Tensor, repeat: int) -> float:
    return x.numel() * 4 / best_seconds(x.sum, repeat) / 1e9


def bandwidth_fracs(rows: list[dict], gbs: float) -> dict:
    """Batch-1 decode tok/s over the bandwidth bound, per weights kind (float32, bfloat16, int8)."""
    out = {}
    for r in rows:
        if r["batch"] == 1:
            r["bandwidth_bound_tok_s"] = gbs * 1e9 / r["bytes_per_token"]
            r["of_bandwidth"] = r["decode_tok_s"] / r["bandwidth_bound_tok_s"]
            if "batch1_split" in r:  # the weight stream alone over the bound: this engine's ceiling
                split = r["batch1_split"]
                split["stream_of_bandwidth"] = 1e3 / r["bandwidth_bound_tok_s"] / split["weight_stream_ms"]
            out[weights_kind(r)] = r["of_bandwidth"]
    return out


def weights_kind(row: dict) -> str:
    return "int8" if row["weights"] == "int8" else row["dtype"]


AGREEMENT_PROMPTS = ((2, 64, 5), (2, 17, 6))  # (prompts, length, seed): two lengths, so cache blocks fill unevenly


def agreement(engine: LocalEngine, trainer, new_tokens: int) -> dict:
    """Max and mean |engine logprob - trainer logprob| over the engine's own samples (T = 0.7)."""
    vocab = trainer.config.vocab_size
    prompts = [p for n, length, seed in AGREEMENT_PROMPTS for p in random_prompts(n, length, vocab, seed)]
    got = engine.generate(prompts, SamplingParams(temperature=0.7, max_tokens=new_tokens, seed=1))
    deltas = []
    for p, c in zip(prompts, got):
        ids = torch.tensor([p + c.token_ids])
        with torch.no_grad():
            lp = token_logprobs(trainer, ids, torch.ones_like(ids), 0.7)[0, len(p):]
        deltas.append((lp - torch.tensor(c.logprobs)).abs())
    d = torch.cat(deltas)
    return {"max_abs_delta": float(d.max()), "mean_abs_delta": float(d.mean())}


def dtype_agreement(model, dtype: str, new_tokens: int, weights: str = "compute") -> dict:
    """One dtype's mismatch, default engine against the fp32 trainer (what RL corrects with TIS);
    the batch-invariant engine against an exact-attention trainer is bench/engine_exact.py's."""
    return agreement(LocalEngine(model, config=EngineConfig(dtype=dtype, weights=weights)), model, new_tokens)


def speed_section(model, quick: bool, dtypes: list[str]) -> dict:
    """Rows for batch 1, 16, 128 in each dtype, bf16/fp32 ratios and each dtype's mismatch."""
    steps, prompt_len = (6, 128) if quick else (16, 256)
    out: dict = {"rows": []}
    for dtype in dtypes:
        for batch in (1, 16, 128):
            r = decode_row(model, dtype, batch, prompt_len, steps)
            out["rows"].append(r)
            print(f"[decode {r['dtype']} batch {batch}] {r['decode_tok_s']:.1f} tok/s, bound "
                  f"{r['matmul_bound_tok_s']:.1f} tok/s: {r['of_bound']:.0%} of the matmul bound", flush=True)
        out[f"agreement_{dtype}"] = a = dtype_agreement(model, dtype, 16 if quick else 32)
        print(f"[agreement {dtype}] max |dlogp| {a['max_abs_delta']:.2e}, mean {a['mean_abs_delta']:.2e}", flush=True)
    by = {(r["dtype"], r["batch"]): r for r in out["rows"]}
    for batch in (1, 16, 128):
        if ("bfloat16", batch) in by and ("float32", batch) in by:
            out[f"bf16_over_fp32_batch{batch}"] = by["bfloat16", batch]["decode_tok_s"] / by["float32", batch]["decode_tok_s"]
    for dtype in ("float32", "bfloat16"):
        if (dtype, 128) in by:
            out[f"of_bound_batch128_{dtype}"] = by[dtype, 128]["of_bound"]
    if "bfloat16" in dtypes:
        out["int8_weights"] = int8_rows(model, steps, prompt_len, 16 if quick else 32, by)
    out["read_bandwidth_by_pages"] = rates = read_rates_gbs()
    out["read_bandwidth_gbs"] = gbs = max(rates.values())
    rows = out["rows"] + out.get("int8_weights", {}).get("rows", [])
    out["batch1_bandwidth_frac"] = fr = bandwidth_fracs(rows, gbs)
    print(f"[bandwidth] {gbs:.1f} GB/s read; batch 1 at " + ", ".join(f"{k} {v:.0%}" for k, v in fr.items())
          + " of its bound", flush=True)
    out["batch1_stream_of_bandwidth"] = {weights_kind(r): r["batch1_split"]["stream_of_bandwidth"]
                                         for r in rows if "batch1_split" in r}
    for r in rows:
        if "batch1_split" in r:
            sp = r["batch1_split"]
            print(f"[batch 1 {weights_kind(r)}] step {r['step_ms']:.2f} ms: linears {sp['linears_ms']:.2f} (their "
                  f"weight stream alone {sp['weight_stream_ms']:.2f}, {sp['stream_of_bandwidth']:.0%} of the bound), "
                  f"attention {sp['attention_ms']:.2f}, rest {sp['rest_ms']:.2f}", flush=True)
    return out


def int8_rows(model, steps: int, prompt_len: int, new_tokens: int, bf16_rows: dict) -> dict:
    """bf16 with weight-only int8 (EngineConfig(weights="int8")): tok/s at batch 1 and 16, the
    ratio to plain bf16 in the same run, and the mismatch against the fp32 trainer."""
    out: dict = {"rows": []}
    for batch in (1, 16):
        r = decode_row(model, "bfloat16", batch, prompt_len, steps, weights="int8")
        out["rows"].append(r)
        out[f"over_bf16_batch{batch}"] = ratio = r["decode_tok_s"] / bf16_rows["bfloat16", batch]["decode_tok_s"]
        print(f"[decode bf16 + int8 weights batch {batch}] {r['decode_tok_s']:.1f} tok/s, {ratio:.2f}x bf16", flush=True)
    out["agreement"] = a = dtype_agreement(model, "bfloat16", new_tokens, weights="int8")
    print(f"[agreement bf16 + int8 weights] max |dlogp| {a['max_abs_delta']:.2e}, mean {a['mean_abs_delta']:.2e}", flush=True)
    return out
