"""Routing replay on a tiny MoE (bench/train.py --section moe; issue 32, item 2): the embedded engine
samples (bf16 compute; or fp32 with an int8 KV cache), the trainer scores the same tokens in fp32
with the engine's routing replayed or not (train/routing_replay.py). Per arm: the fraction of
(token, MoE layer) decisions whose experts differ between the trainer's forward and the engine's,
the mean and max |Δlogp| of the sampled tokens and the k3 KL(sampler || trainer).

Two models. "random init": the tiny Qwen3-MoE as built (seed 0), random prompts (the first runs,
kept for comparison: moe_arms). "trained": the same model trained in-process on a synthetic topic
language until its held-out loss plateaus (bench/parts/moe_training.py), prompts from that language
(moe_trained_arms), plus a control arm: an fp32 engine (fp32 KV), where no rounding separates
engine and trainer.

Headline (chosen before the trained arm was first measured): the trained model, bf16 engine,
64 prompts of 32 tokens from the language, 64 tokens sampled after each at temperature 1; keys
moe_router_mismatch_off/on and moe_logp_gap_ratio (mean |Δlogp|, replay off / on).
"""

from __future__ import annotations

import contextlib
import random
import types

import torch
import torch.nn.functional as F
from parts import moe_training
from parts.topic_language import TopicLanguage

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.local import LocalEngine
from posttrain.models.tiny import PRESETS, build_tiny_model
from posttrain.train.batch import collate
from posttrain.train.logprobs import token_logprobs
from posttrain.train.mismatch import mismatch_stats
from posttrain.train import routing_replay
from posttrain.train.routing_replay import routed
from posttrain.types import Episode

VOCAB, PROMPT_LEN, SEED = 1024, 32, 0
ENGINES = {"bf16": dict(dtype="bfloat16"), "int8_kv": dict(kv_dtype="int8"), "fp32": dict()}
RANDOM_INIT_ENGINES, TRAINED_ENGINES = ("bf16", "int8_kv"), ("bf16", "int8_kv", "fp32")


def random_prompts(n: int) -> list[list[int]]:
    rng = random.Random(SEED)
    return [[rng.randrange(10, VOCAB) for _ in range(PROMPT_LEN)] for _ in range(n)]


def language_prompts(language: TopicLanguage, n: int) -> list[list[int]]:
    """`n` prompts of PROMPT_LEN tokens from the language (seeded apart from its training data)."""
    rng = random.Random(SEED + 2)
    return [language.sample(rng, PROMPT_LEN)[1] for _ in range(n)]


def _episodes(model, engine: str, prompts: list[list[int]], tokens: int) -> list[Episode]:
    """`tokens` sampled after each prompt at temperature 1 by the engine."""
    config = EngineConfig(enable_prefix_caching=False, **ENGINES[engine])
    params = SamplingParams(temperature=1.0, max_tokens=tokens, seed=SEED)
    out = LocalEngine(model, config=config).generate(prompts, params)
    eps = []
    for i, (x, c) in enumerate(zip(prompts, out)):
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


@contextlib.contextmanager
def bf16_router_logits():
    """A diagnostic: the replaying forward's router logits computed in bf16 (its input and weight
    rounded), as a bf16 engine computes them; everything else stays fp32."""
    saved = routing_replay.F
    routing_replay.F = types.SimpleNamespace(linear=lambda x, w: F.linear(x.bfloat16(), w.bfloat16()).float())
    try:
        yield
    finally:
        routing_replay.F = saved


def replay_arm(model, engine: str, prompts: list[list[int]], tokens: int) -> dict:
    """One engine's samples scored by the fp32 trainer with replay off and on (and, for a bf16
    engine, on with bf16 router logits: the share of what is left that the router's dtype explains)."""
    eps = _episodes(model, engine, prompts, tokens)  # the engine casts its own copy (bf16) or shares it (fp32)
    (off, lp_off), (on, lp_on) = _score(model, eps, False), _score(model, eps, True)
    extra = {}
    if ENGINES[engine].get("dtype") == "bfloat16":
        with bf16_router_logits():
            extra["on_router_logits_bf16"] = _score(model, eps, True)[0]
    return {"off": off, "on": on, **extra, "decisions": sum(len(e.routing) for e in eps) * len(eps[0].routing[0]),
            # what replay changes in the trainer's own logprobs: the routing's share of the gap
            "trainer_off_vs_on_mean": float((lp_off - lp_on).abs().mean()),
            **{f"{key}_ratio": round(off[key] / max(on[key], 1e-12), 2)
               for key in ("logp_gap_mean", "logp_gap_max", "k3")}}


def _trained_model(quick: bool) -> tuple[object, TopicLanguage, dict]:
    """The tiny MoE trained on the topic language; the training record (specialisation before/after)."""
    language = TopicLanguage.build(VOCAB, seed=SEED)
    model = build_tiny_model(VOCAB, "tiny-moe", seed=SEED)
    topics, ids = moe_training.sample_batch(language, random.Random(SEED + 3), moe_training.EVAL_SEQS)
    before = moe_training.specialisation(model, topics, ids)
    record = moe_training.train_until_plateau(model, language, SEED, max_steps=200 if quick else moe_training.MAX_STEPS)
    nll = [x for t, row in zip(topics.tolist(), ids.tolist()) for x in language.transition_nll(t, row)]
    record |= {"held_out_loss_floor": round(sum(nll) / len(nll), 4),  # a model that knows topic and chain
               "specialisation_init": before, "specialisation_trained": moe_training.specialisation(model, topics, ids)}
    return model, language, record


def measure(quick: bool) -> dict:
    prompts, tokens = (16, 32) if quick else (64, 64)
    untrained = build_tiny_model(VOCAB, "tiny-moe", seed=SEED)
    random_arms = {e: replay_arm(untrained, e, random_prompts(prompts), tokens) for e in RANDOM_INIT_ENGINES}
    model, language, training = _trained_model(quick)
    trained_arms = {e: replay_arm(model, e, language_prompts(language, prompts), tokens) for e in TRAINED_ENGINES}
    main, preset = trained_arms["bf16"], PRESETS["tiny-moe"]
    return {
        "moe_model": (f"Qwen3-MoE, hidden {preset['hidden_size']}, {preset['num_hidden_layers']} MoE layers, "
                      f"{preset['num_experts']} experts, top {preset['num_experts_per_tok']}, vocab {VOCAB}, "
                      f"seed {SEED}; random init (moe_arms) and trained on a topic language (moe_trained_arms)"),
        "moe_workload": (f"{prompts} prompts of {PROMPT_LEN} tokens (random for the random-init model, from the "
                         f"language for the trained one), {tokens} tokens sampled each at temperature 1"),
        "moe_engine": "bf16 compute; int8_kv: fp32 compute, int8 KV cache; fp32: fp32 compute and KV (control); "
                      "trainer fp32 HF forward",
        "moe_headline": "trained model, bf16 engine (chosen before the run)",
        "moe_router_mismatch_off": main["off"]["router_mismatch"],
        "moe_router_mismatch_on": main["on"]["router_mismatch"],
        "moe_logp_gap_ratio": main["logp_gap_mean_ratio"],  # mean |Δlogp|, replay off / on
        "moe_logp_gap_target_met": main["logp_gap_mean_ratio"] >= 10 and main["on"]["router_mismatch"] == 0,
        "moe_random_init_logp_gap_ratio": random_arms["bf16"]["logp_gap_mean_ratio"],
        "moe_arms": random_arms,
        "moe_trained_arms": trained_arms,
        "moe_training": training,
    }


def _rows(title: str, arms: dict) -> list[str]:
    lines = [title]
    for name, arm in arms.items():
        for replay in ("off", "on"):
            a = arm[replay]
            lines.append(f"{name:<8} {replay:<6} {a['router_mismatch']:>16.4f} {a['logp_gap_mean']:>12.2e} "
                         f"{a['logp_gap_max']:>11.2e} {a['k3']:>9.2e}")
        if "on_router_logits_bf16" in arm:
            a = arm["on_router_logits_bf16"]
            lines.append(f"{name:<8} on, router logits in bf16: mean |dlogp| {a['logp_gap_mean']:.2e}, "
                         f"max {a['logp_gap_max']:.2e}")
        lines.append(f"{name:<8} off / on: mean |dlogp| {arm['logp_gap_mean_ratio']}x, "
                     f"max {arm['logp_gap_max_ratio']}x, k3 {arm['k3_ratio']}x ({arm['decisions']} decisions); "
                     f"replay moves the trainer's own logprobs {arm['trainer_off_vs_on_mean']:.2e} (mean)")
    return lines


def table(r: dict) -> str:
    t, spec = r["moe_training"], r["moe_training"]["specialisation_trained"]
    header = (f"{'engine':<8} {'replay':<6} {'decisions differ':>16} {'mean|dlogp|':>12} {'max|dlogp|':>11} "
              f"{'k3 KL':>9}")
    training = (f"trained {t['steps']} steps ({t['stopped']}, {t['train_s']} s): held-out loss "
                f"{t['history'][-1]['held_out_loss']} (floor {t['held_out_loss_floor']}); per layer, mean: "
                f"aux {spec['mean_aux_loss']}, usage entropy {spec['mean_usage_entropy']}, "
                f"topic information {spec['mean_topic_information_bits']} bits "
                f"(init {t['specialisation_init']['mean_topic_information_bits']})")
    return "\n".join([header, *_rows("random init", r["moe_arms"]), training,
                      *_rows("trained", r["moe_trained_arms"]),
                      f"headline (trained, bf16): mean-gap ratio {r['moe_logp_gap_ratio']}x "
                      f"(target 10x: {'met' if r['moe_logp_gap_target_met'] else 'NOT met'})"])
