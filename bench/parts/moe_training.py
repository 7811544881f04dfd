"""Train the tiny Qwen3-MoE on the topic language (bench/parts/topic_language.py) until its
held-out loss plateaus, and measure how its experts specialised (bench/train.py --section moe).

Recipe (fixed before the first measured run, not tuned for the replay numbers): HF's causal-LM
loss plus Qwen3-MoE's own load-balancing term (router_aux_loss_coef, 0.001 by default); AdamW,
lr 2e-3 after a 50-step linear warm-up, betas (0.9, 0.95), weight decay 0.01, gradients clipped
at 1.0; batches of 16 sequences of 96 tokens (a bench prompt of 32 plus 64 sampled). Every 50
steps the loss on 64 held-out sequences is measured; training stops when it fell by less than 1%
over the last 200 steps, or after MAX_STEPS.
"""

from __future__ import annotations

import math
import random
import time

import torch
import torch.nn.functional as F

from parts.topic_language import TopicLanguage
from posttrain.train.routing_replay import load_balancing_loss

BATCH, LENGTH, LR, WARMUP = 16, 96, 2e-3, 50
EVAL_EVERY, EVAL_SEQS, PLATEAU_EVALS, PLATEAU_GAIN, MAX_STEPS = 50, 64, 4, 0.01, 1500


def sample_batch(language: TopicLanguage, rng: random.Random, n: int, length: int = LENGTH):
    """(topics [n], token ids [n, length])."""
    topics, rows = zip(*(language.sample(rng, length) for _ in range(n)))
    return torch.tensor(topics), torch.tensor(rows)


def transition_loss(model, ids: torch.Tensor) -> float:
    """Mean cross-entropy of the transitions after each sequence's first word (positions 2..):
    the positions TopicLanguage.transition_nll scores."""
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, 1:-1]  # predicts ids[:, 2:]
    return float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 2:].reshape(-1)))


def plateaued(losses: list[float], evals: int = PLATEAU_EVALS, gain: float = PLATEAU_GAIN) -> bool:
    """True when the last of `losses` (one per evaluation) is less than `gain` (relative) below the
    one `evals` evaluations earlier."""
    return len(losses) > evals and losses[-1] > (1 - gain) * losses[-1 - evals]


def train_until_plateau(model, language: TopicLanguage, seed: int, max_steps: int = MAX_STEPS,
                        eval_every: int = EVAL_EVERY) -> dict:
    """Train `model` in place (then back in eval mode); the loss history and what stopped it."""
    rng, held_out = random.Random(seed), sample_batch(language, random.Random(seed + 1), EVAL_SEQS)[1]
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.95), weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / WARMUP))
    history, start, step = [], time.perf_counter(), 0
    model.train()
    while step < max_steps and not plateaued([h["held_out_loss"] for h in history]):
        ids = sample_batch(language, rng, BATCH)[1]
        out = model(input_ids=ids, labels=ids, output_router_logits=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step(), sched.step(), opt.zero_grad()
        step += 1
        if step % eval_every == 0:
            model.eval()
            history.append({"step": step, "train_loss": round(out.loss.item(), 4),
                            "aux_loss": round(out.aux_loss.item(), 4),
                            "held_out_loss": round(transition_loss(model, held_out), 4)})
            model.train()
            print(f"  step {step}: {history[-1]}", flush=True)
    model.eval()
    return {"steps": step, "stopped": "plateau" if step < max_steps else "max_steps",
            "train_s": round(time.perf_counter() - start, 1), "history": history}


def usage_entropy(picks: torch.Tensor, experts: int) -> float:
    """Entropy of the share of picks [N, k] each expert gets, over log(experts): 1 is even use."""
    share = torch.bincount(picks.reshape(-1), minlength=experts).float() / picks.numel()
    return float(-(share * share.clamp_min(1e-12).log()).sum() / math.log(experts))


def topic_information(picks: torch.Tensor, topics: torch.Tensor, experts: int) -> float:
    """Mutual information in bits between a pick's topic and its expert (picks [N, k], topics [N]):
    0 when every topic uses the experts alike, log2(experts) at most."""
    joint = torch.zeros(int(topics.max()) + 1, experts)
    joint.index_put_((topics.repeat_interleave(picks.shape[1]), picks.reshape(-1)),
                     torch.ones(picks.numel()), accumulate=True)
    joint /= joint.sum()
    indep = joint.sum(1, keepdim=True) * joint.sum(0, keepdim=True)
    nz = joint > 0
    return float((joint[nz] * (joint[nz] / indep[nz]).log2()).sum())


def specialisation(model, topics: torch.Tensor, ids: torch.Tensor) -> dict:
    """Per MoE layer, on sequences ids [B, T] of topics [B]: the load-balancing loss (k = even use),
    expert-usage entropy and topic-expert information of the router's top-k."""
    with torch.no_grad():
        router_logits = model(input_ids=ids, output_router_logits=True).router_logits
    k, token_topics, rows = model.config.num_experts_per_tok, topics.repeat_interleave(ids.shape[1]), []
    for logits in router_logits:  # [B*T, E]
        probs = logits.float().softmax(-1)
        picks = probs.topk(k, dim=-1).indices
        keep = torch.ones(len(picks), dtype=torch.bool)
        rows.append({"aux_loss": round(float(load_balancing_loss(probs, picks, keep)), 4),
                     "usage_entropy": round(usage_entropy(picks, probs.shape[1]), 4),
                     "topic_information_bits": round(topic_information(picks, token_topics, probs.shape[1]), 4)})
    return {"per_layer": rows, **{f"mean_{key}": round(sum(r[key] for r in rows) / len(rows), 4)
                                  for key in rows[0]}}
