"""Training at length and on MoE (issue 32). Two sections, both by default, and a third on its own:

long_step (item 1): one RL training step (forward, backward of the GRPO loss, AdamW) of the tiny
Llama (hidden 128, 4 layers) with SmolLM2's 49,152-token vocabulary on one 32k-token episode: the
plain step (full logits, every layer's activations kept) against the lean one
(optim.activation_checkpointing + optim.logprob_chunk = 512).

moe (item 2): a tiny Qwen3-MoE sampled by the engine in bf16 (and fp32 with int8 KV) and scored by
the trainer in fp32, with routing replay off and on (bench/parts/moe_replay.py): router decisions
that differ, |Δlogp| and k3 KL, on the random-init model and on the same model trained in-process
on a synthetic topic language until its loss plateaus (a few minutes; an fp32 engine as control).
Headline, chosen before the first trained run: the trained model with the bf16 engine.

passkey (--section passkey, its own JSON: bench/results/train_passkey.json): a tiny Llama trained
at 512 tokens retrieves a passkey at 2,048 with no rope scaling, PI and YaRN (models/rope.py),
each tuned for 200 steps first (bench/parts/passkey_bench.py). 38 minutes on 2 cores shared with
another benchmark (the committed run); --quick: 60 mixed-length and 15 tuning steps.

    python bench/train.py [--quick] [--section long_step|moe|passkey] [--json PATH]  # --quick: 4,096 tokens

Each arm runs in a fresh process (bench/parts/long_step.py): peak memory is its peak RSS over
the step minus its RSS before it. The plain step's fp32 logits alone are tokens x 49,152 x 4 bytes
(6.4 GB at 32k), about four times over with log-softmax and the backward: where it cannot fit in
the free memory it is measured at the longest length that fits (3/4, 1/2, ... of the target), and
the table and JSON say so. Loss, gradients and step time are compared at that same length; a
third arm, chunked logprobs alone, shows what checkpointing adds.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from parts import moe_replay, passkey_bench
from parts.long_step import CHUNK, VOCAB
from parts.report import add_args, cpu, write_json

from posttrain.machine import cpu_line

LONG_STEP = Path(__file__).parent / "parts" / "long_step.py"
TARGET_RATIO = 8.0
RTOL_LOSS, RTOL_GRAD = 1e-5, 1e-4  # grads: max |diff| over max |grad|


def _arm(arm: str, tokens: int, tmp: Path) -> dict:
    out = tmp / f"{arm}_{tokens}.pt"
    subprocess.run([sys.executable, str(LONG_STEP), "--arm", arm, "--tokens", str(tokens),
                    "--out", str(out)], check=True)
    result = torch.load(out)
    out.unlink()
    what = (f"{result['peak_mb']:,.0f} MB, {result['time_s']:.1f} s" if result["fits"]
            else f"does not fit ({result['error']})")
    print(f"  {arm:>8} at {tokens:>6} tokens: {what}", flush=True)
    return result


def _plain_that_fits(tokens: int, tmp: Path) -> tuple[int, dict]:
    """The plain arm at `tokens`, else at 3/4, 1/2, 1/4, 1/8 of it: the first that fits."""
    for share in (1, 0.75, 0.5, 0.25, 0.125):
        n = int(tokens * share)
        result = _arm("plain", n, tmp)
        if result["fits"]:
            return n, result
    raise SystemExit(f"the plain step does not fit even at {n} tokens")


def _agreement(plain: dict, lean: dict) -> dict:
    diff = max(float((plain["grads"][k] - lean["grads"][k]).abs().max()) for k in plain["grads"])
    scale = max(float(g.abs().max()) for g in plain["grads"].values())
    loss_rel = abs(plain["loss"] - lean["loss"]) / abs(plain["loss"])
    return {"loss_plain": plain["loss"], "loss_lean": lean["loss"], "loss_rel_diff": loss_rel,
            "grad_max_abs_diff": diff, "grad_max_abs": scale,
            "same_loss_and_grads": loss_rel <= RTOL_LOSS and diff <= RTOL_GRAD * scale,
            "tolerance": f"loss rtol {RTOL_LOSS}; grads max|diff| <= {RTOL_GRAD} x max|grad|"}


def measure(tokens: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        lean = _arm("lean", tokens, Path(tmp))
        chunked = _arm("chunked", tokens, Path(tmp))
        plain_tokens, plain = _plain_that_fits(tokens, Path(tmp))
        lean_same = lean if plain_tokens == tokens else _arm("lean", plain_tokens, Path(tmp))
    fits = plain_tokens == tokens
    return {
        "long_step_tokens": tokens, "vocab": VOCAB, "logprob_chunk": CHUNK,
        "model": "tiny (hidden 128, 4 layers)",
        "long_step_peak_mb_lean": round(lean["peak_mb"], 1),
        "long_step_peak_mb_chunked_only": round(chunked["peak_mb"], 1),
        "long_step_peak_mb_plain": round(plain["peak_mb"], 1),
        "long_step_plain_tokens": plain_tokens,
        "long_step_plain_note": ("measured at the full length" if fits else
                                 f"the plain step does not fit in this machine's free memory at {tokens} "
                                 f"tokens; measured at {plain_tokens}, so the ratio is a lower bound"),
        "long_step_peak_ratio": round(plain["peak_mb"] / lean["peak_mb"], 1),
        "long_step_peak_ratio_same_tokens": round(plain["peak_mb"] / lean_same["peak_mb"], 1),
        "long_step_target_met": plain["peak_mb"] / lean["peak_mb"] >= TARGET_RATIO,
        "long_step_time_s_lean": round(lean["time_s"], 2),
        "long_step_time_s_chunked_only": round(chunked["time_s"], 2),
        "long_step_time_s_plain": round(plain["time_s"], 2),
        "long_step_time_s_lean_same_tokens": round(lean_same["time_s"], 2),
        "long_step_time_ratio": round(lean_same["time_s"] / plain["time_s"], 3),
        **_agreement(plain, lean_same),
        "memory": "peak RSS of the arm's own process over the step (VmHWM, reset after a 512-token "
                  "warm-up step) minus its RSS before the step; model, AdamW state and the warm-up "
                  "are in the base",
    }


def _table(r: dict) -> str:
    rows = [("lean (checkpointing + chunks)", r["long_step_tokens"], r["long_step_peak_mb_lean"],
             r["long_step_time_s_lean"]),
            ("chunked logprobs only", r["long_step_tokens"], r["long_step_peak_mb_chunked_only"],
             r["long_step_time_s_chunked_only"]),
            ("plain (full logits)", r["long_step_plain_tokens"], r["long_step_peak_mb_plain"],
             r["long_step_time_s_plain"])]
    if r["long_step_plain_tokens"] != r["long_step_tokens"]:
        rows.append(("lean, plain's length", r["long_step_plain_tokens"], None,
                     r["long_step_time_s_lean_same_tokens"]))
    lines = [f"{'arm':<30} {'tokens':>7} {'peak MB':>9} {'step s':>8}"]
    lines += [f"{a:<30} {n:>7} {'' if mb is None else f'{mb:,.0f}':>9} {s:>8.1f}" for a, n, mb, s in rows]
    lines += [f"peak plain / lean: {r['long_step_peak_ratio']}x (target {TARGET_RATIO:.0f}x: "
              f"{'met' if r['long_step_target_met'] else 'NOT met'}); {r['long_step_plain_note']}",
              f"step time lean / plain at {r['long_step_plain_tokens']} tokens: {r['long_step_time_ratio']}",
              f"same loss and gradients: {r['same_loss_and_grads']} (loss rel diff {r['loss_rel_diff']:.1e}, "
              f"grad max|diff| {r['grad_max_abs_diff']:.1e} of max|grad| {r['grad_max_abs']:.1e})"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_args(parser, "4,096 tokens instead of 32,768; the MoE section on fewer prompts")
    parser.add_argument("--section", choices=("all", "long_step", "moe", "passkey"), default="all",
                        help="all: long_step and moe; passkey runs only when named")
    args = parser.parse_args()
    result = {"cpu": cpu()}
    print(cpu_line(result["cpu"]), flush=True)
    if args.section in ("all", "long_step"):
        result |= measure(4096 if args.quick else 32_768)
        print(_table(result))
        write_json(args.json, result)
    if args.section in ("all", "moe"):
        torch.set_num_threads(1)  # tiny matmuls: a second thread on a shared 2-core machine slows them
        result |= moe_replay.measure(args.quick)
        print(moe_replay.table(result))
        write_json(args.json, result)
    if args.section == "passkey":
        torch.set_num_threads(result["cpu"]["cores"])
        torch.manual_seed(passkey_bench.SEED)
        result |= passkey_bench.measure(args.quick)
        print(passkey_bench.table(result))
        write_json(args.json, result)


if __name__ == "__main__":
    main()
