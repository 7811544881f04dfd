"""Batch-invariant fp32 logprobs and what they cost (bench/engine.py, issue 21).

agreement   max |engine - trainer| logprob on SmolLM2 (T = 0.7) for a batch_invariant engine in
            each cache, batch and chunking configuration of tests/engine/test_exact_attention.py,
            against a trainer with exact attention and against the plain (SDPA) trainer
cost        decode step at batch 1, 16, 128 with exact (float64) attention vs float32 attention
            (same engine, same packed linears), and a trainer forward + backward with exact
            attention vs SDPA
"""

from __future__ import annotations

import copy
import time

import torch
from parts.engine_speed import decode_row, random_prompts

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.local import LocalEngine
from posttrain.kernels.exact_attention import use_exact_attention
from posttrain.train.batch import right_pad
from posttrain.train.logprobs import token_logprobs

CONFIGS = {
    "default": dict(),
    "tiny-blocks-preempt": dict(block_size=4, num_blocks=400, max_num_batched_tokens=16),
    "chunked": dict(block_size=3, max_num_seqs=3, max_num_batched_tokens=7),
    "no-prefix-cache": dict(enable_prefix_caching=False),
    "ngram": dict(spec_method="ngram", spec_tokens=3),
}


def _prompts(vocab: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(0)
    base = [torch.randint(20, vocab - 1, (int(n),), generator=g).tolist() for n in (5, 23, 40, 57, 70)]
    return base + [base[0]] * 3 + [base[3]] * 2  # mixed lengths and two GRPO groups


def _max_delta(trainer, prompts, out, temperature) -> float:
    ids, mask = right_pad([p + c.token_ids for p, c in zip(prompts, out)])
    with torch.no_grad():
        lp = token_logprobs(trainer, ids, mask, temperature)
    return max((lp[i, len(p) : len(p) + len(c.token_ids)] - torch.tensor(c.logprobs)).abs().max().item()
               for i, (p, c) in enumerate(zip(prompts, out)))


def agreement(model, new_tokens: int) -> dict:
    exact = use_exact_attention(copy.deepcopy(model))
    prompts = _prompts(model.config.vocab_size)
    params = SamplingParams(temperature=0.7, max_tokens=new_tokens, seed=3)
    rows = {}
    for name, cfg in CONFIGS.items():
        eng = LocalEngine(exact, config=EngineConfig(batch_invariant=True, **cfg))
        miss, hit = eng.generate(prompts, params), eng.generate(prompts, params)
        rows[name] = {"exact_trainer": max(_max_delta(exact, prompts, o, 0.7) for o in (miss, hit)),
                      "sdpa_trainer": max(_max_delta(model, prompts, o, 0.7) for o in (miss, hit))}
        print(f"[agreement {name}] vs exact trainer {rows[name]['exact_trainer']:.2e}, "
              f"vs SDPA trainer {rows[name]['sdpa_trainer']:.2e}", flush=True)
    alone = LocalEngine(exact, config=EngineConfig(batch_invariant=True)).generate(prompts[:1], params)
    rows["batch-1"] = {"exact_trainer": _max_delta(exact, prompts[:1], alone, 0.7),
                       "sdpa_trainer": _max_delta(model, prompts[:1], alone, 0.7)}
    worst = max(r["exact_trainer"] for r in rows.values())
    return {"rows": rows, "max_abs_delta": worst, "sdpa_trainer_max_abs_delta": max(r["sdpa_trainer"] for r in rows.values())}


def decode_cost(model, quick: bool) -> dict:
    steps, prompt_len = (6, 128) if quick else (16, 256)
    out = {}
    for batch in (1, 16, 128):
        fast = decode_row(model, "float32", batch, prompt_len, steps)
        exact = decode_row(model, "float32", batch, prompt_len, steps, batch_invariant=True)
        out[f"batch{batch}"] = {"exact_step_ms": exact["step_ms"], "fp32_attention_step_ms": fast["step_ms"],
                                "cost": exact["step_ms"] / fast["step_ms"] - 1,
                                "exact_of_bound": exact["of_bound"], "fp32_attention_of_bound": fast["of_bound"]}
        print(f"[exact attention decode batch {batch}] {exact['step_ms']:.1f} vs {fast['step_ms']:.1f} ms a step "
              f"({out[f'batch{batch}']['cost']:+.0%}); of the bound {exact['of_bound']:.0%} vs {fast['of_bound']:.0%}",
              flush=True)
    return out


def trainer_cost(model, shapes=((4, 256), (1, 1024))) -> dict:
    """Seconds of one forward + backward of token_logprobs, SDPA vs exact attention (best of 2)."""
    exact = use_exact_attention(copy.deepcopy(model))
    out = {}
    for b, t in shapes:
        ids = torch.tensor(random_prompts(b, t, model.config.vocab_size, 9))
        best = {}
        for name, m in (("sdpa", model), ("exact", exact)) * 2:
            t0 = time.perf_counter()
            token_logprobs(m, ids, torch.ones_like(ids), 0.7).sum().backward()
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - t0)
            m.zero_grad(set_to_none=True)
        out[f"{b}x{t}"] = {"sdpa_s": best["sdpa"], "exact_s": best["exact"], "cost": best["exact"] / best["sdpa"] - 1}
        print(f"[exact attention trainer {b}x{t}] fwd+bwd {best['exact']:.2f} vs {best['sdpa']:.2f} s "
              f"({out[f'{b}x{t}']['cost']:+.0%})", flush=True)
    return out


def exact_section(model, quick: bool) -> dict:
    return {"agreement": agreement(model, 16 if quick else 32), "decode_cost": decode_cost(model, quick),
            "trainer_cost": trainer_cost(model, ((4, 256),) if quick else ((4, 256), (1, 1024)))}
