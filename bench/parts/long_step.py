"""One arm of bench/train.py in its own process: one RL training step of a tiny Llama with a
49k vocabulary on one long episode, through PolicyTrainer.rl_part (the HF forward, GRPO loss,
backward, AdamW), with the arm's transforms; writes its peak memory, time, loss and gradients.

    python bench/parts/long_step.py --arm lean --tokens 32768 --out PATH

Peak memory: the process's peak RSS over the step (VmHWM, reset through /proc/self/clear_refs
after a short warm-up step) minus its RSS just before. The address space is capped at what the
machine has free, so an arm that cannot fit fails with an allocation error (written as
fits = false) instead of waking the OOM killer.
"""

from __future__ import annotations

import argparse
import random
import resource
import time
from pathlib import Path

import torch

from posttrain.models.tiny import build_tiny_model
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig
from posttrain.types import Episode

VOCAB, PROMPT, CHUNK = 49_152, 64, 512
# plain: full logits, every layer's activations kept; chunked: logprobs in chunks only;
# lean: chunks and activation checkpointing.
ARMS = {"plain": {}, "chunked": {"logprob_chunk": CHUNK},
        "lean": {"logprob_chunk": CHUNK, "activation_checkpointing": True}}
RL = RLConfig(packed=False, share_prefix=False, tis="token")  # the HF forward over one sequence


def _status_mb(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024  # kB
    raise KeyError(key)


def _free_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    raise KeyError("MemAvailable")


def _cap_address_space(margin_mb: float = 1024) -> None:
    limit = int((_status_mb("VmSize") + _free_mb() - margin_mb) * 2**20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))


def episode(tokens: int, seed: int = 0) -> Episode:
    """A PROMPT-token prompt and a sampled reply filling `tokens`, sampler logprobs log(1/V)."""
    rng = random.Random(seed)
    e = Episode("long", 0)
    e.append([rng.randrange(1, VOCAB) for _ in range(PROMPT)], sampled=False)
    e.prompt_len = PROMPT
    reply = [rng.randrange(1, VOCAB) for _ in range(tokens - PROMPT)]
    e.append(reply, sampled=True, logprobs=[-10.8] * len(reply))
    return e


def run(arm: str, tokens: int) -> dict:
    model = build_tiny_model(VOCAB, seed=0, max_position_embeddings=tokens)
    # lr ~0 and no clipping: the step leaves each parameter's .grad as the loss's gradient
    trainer = PolicyTrainer(model, 0, OptimConfig(lr=1e-12, grad_clip=1e12, **ARMS[arm]))
    trainer.rl_part([episode(512, seed=1)], [1.0], RL)  # warm-up: kernels, AdamW state
    _cap_address_space()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    base = _status_mb("VmRSS")
    t0 = time.perf_counter()
    try:
        stats, _, _ = trainer.rl_part([episode(tokens)], [1.0], RL)
    except (RuntimeError, MemoryError) as e:
        return {"fits": False, "error": str(e).splitlines()[0][:200], "base_mb": base}
    return {"fits": True, "peak_mb": _status_mb("VmHWM") - base, "base_mb": base,
            "time_s": time.perf_counter() - t0, "forward_s": stats["forward_s"],
            "backward_s": stats["backward_s"], "loss": stats["loss"],
            "grads": {n: p.grad.clone() for n, p in model.named_parameters()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", choices=sorted(ARMS), required=True)
    parser.add_argument("--tokens", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.save(run(args.arm, args.tokens), args.out)


if __name__ == "__main__":
    main()
