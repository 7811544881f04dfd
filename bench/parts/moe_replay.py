"""Routing replay on a tiny MoE (bench/train.py --section moe; issue 32, item 2): the embedded engine
samples (bf16 compute; or fp32 with an int8 KV cache), the trainer scores the same tokens in fp32
with the engine's routing replayed or not (train/routing_replay.py). Per arm: the fraction of
(token, MoE layer) decisions whose experts differ between the trainer's forward and the engine's,
the mean and max |Δlogp| of the sampled tokens and the k3 KL(sampler || trainer).
"""

from __future__ import annotations

import random

import torch

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.local import LocalEngine
from posttrain.models.tiny import PRESETS, build_tiny_model
from posttrain.train.batch import collate
from posttrain.train.logprobs import token_logprobs
from posttrain.train.mismatch import mismatch_stats
from posttrain.train.routing_replay import routed
from posttrain.types import Episode

VOCAB, PROMPT_LEN, SEED = 1024, 32, 0
ENGINES = {"bf16": dict(dtype="bfloat16"), "int8_kv": dict(kv_dtype="int8")}


def _episodes(model, engine: str, prompts: int, tokens: int) -> list[Episode]:
    """`prompts` random prompts, `tokens` sampled after each at temperature 1 by the engine."""
    rng = random.Random(SEED)
    xs = [[rng.randrange(10, VOCAB) for _ in range(PROMPT_LEN)] for _ in range(prompts)]
    config = EngineConfig(enable_prefix_caching=False, **ENGINES[engine])
    out = LocalEngine(model, config=config).generate(xs, SamplingParams(temperature=1.0, max_tokens=tokens, seed=SEED))
    eps = []
    for i, (x, c) in enumerate(zip(xs, out)):
        ep = Episode(f"p{i}", i)
        ep.append(x, sampled=False)
        ep.prompt_len = len(x)
        ep.append_completion(c)
        eps.append(ep)
    return eps


def _score(model, episodes: list[Episode], replay: bool) -> tuple[dict, torch.Tensor]:
    """The trainer's router and logprob gaps to the engine, and its logprobs of the sampled tokens."""
    b = collate(episodes, 0)
    with torch.no_grad(), routed(model, b.routing, b.attention_mask, pin=replay) as router:
        lp = token_logprobs(model, b.input_ids, b.attention_mask)
    keep = b.loss_mask.bool()
    gap = (lp - b.old_logprobs)[keep].abs()
    stats = {"router_mismatch": router["moe_router_mismatch"], "router_mismatch_own": router["moe_router_mismatch_own"],
             "logp_gap_mean": float(gap.mean()), "logp_gap_max": float(gap.max()),
             "k3": mismatch_stats(lp, b.old_logprobs, b.loss_mask)["mismatch_k3"], "aux_loss": router["moe_aux_loss"]}
    return stats, lp[keep]


def _arm(engine: str, prompts: int, tokens: int) -> dict:
    model = build_tiny_model(VOCAB, "tiny-moe", seed=SEED)
    eps = _episodes(model, engine, prompts, tokens)  # the engine casts its own copy (bf16) or shares it (fp32)
    (off, lp_off), (on, lp_on) = _score(model, eps, False), _score(model, eps, True)
    return {"off": off, "on": on, "decisions": sum(len(e.routing) for e in eps) * len(eps[0].routing[0]),
            # what replay changes in the trainer's own logprobs: the routing's share of the gap
            "trainer_off_vs_on_mean": float((lp_off - lp_on).abs().mean()),
            **{f"{key}_ratio": round(off[key] / max(on[key], 1e-12), 2)
               for key in ("logp_gap_mean", "logp_gap_max", "k3")}}


def measure(quick: bool) -> dict:
    prompts, tokens = (16, 32) if quick else (64, 64)
    arms = {name: _arm(name, prompts, tokens) for name in ENGINES}
    main = arms["bf16"]
    preset = PRESETS["tiny-moe"]
    return {
        "moe_model": (f"Qwen3-MoE, hidden {preset['hidden_size']}, {preset['num_hidden_layers']} MoE layers, "
                      f"{preset['num_experts']} experts, top {preset['num_experts_per_tok']}, vocab {VOCAB}, "
                      f"random init (seed {SEED})"),
        "moe_workload": f"{prompts} random {PROMPT_LEN}-token prompts, {tokens} tokens sampled each at temperature 1",
        "moe_engine": "bf16 compute (the int8_kv arm: fp32 compute, int8 KV cache); trainer fp32 HF forward",
        "moe_router_mismatch_off": main["off"]["router_mismatch"],
        "moe_router_mismatch_on": main["on"]["router_mismatch"],
        "moe_logp_gap_ratio": main["logp_gap_mean_ratio"],  # mean |Δlogp|, replay off / on
        "moe_logp_gap_target_met": main["logp_gap_mean_ratio"] >= 10 and main["on"]["router_mismatch"] == 0,
        "moe_arms": arms,
    }


def table(r: dict) -> str:
    lines = [f"{'engine':<8} {'replay':<6} {'decisions differ':>16} {'mean|dlogp|':>12} {'max|dlogp|':>11} "
             f"{'k3 KL':>9}"]
    for name, arm in r["moe_arms"].items():
        for replay in ("off", "on"):
            a = arm[replay]
            lines.append(f"{name:<8} {replay:<6} {a['router_mismatch']:>16.4f} {a['logp_gap_mean']:>12.2e} "
                         f"{a['logp_gap_max']:>11.2e} {a['k3']:>9.2e}")
        lines.append(f"{name:<8} off / on: mean |dlogp| {arm['logp_gap_mean_ratio']}x, "
                     f"max {arm['logp_gap_max_ratio']}x, k3 {arm['k3_ratio']}x ({arm['decisions']} decisions); "
                     f"replay moves the trainer's own logprobs {arm['trainer_off_vs_on_mean']:.2e} (mean)")
    return "\n".join(lines)
