"""Chunked logprobs (issue 30, item 3): peak memory of logprobs + entropy over a 49k vocabulary,
forward and backward, with the full logits against `optim.logprob_chunk` (train/chunked.py).

    python bench/chunked_logprobs.py [--quick] [--json PATH] [--chunk 512]

Each variant runs in a fresh Python process: random final hidden states [tokens, 576] and an
output embedding [49152, 576] (SmolLM2-135M's shapes), both with grad; the loss uses the chosen
token's logprob and the entropy; forward and backward once. Peak memory is the growth of the
process's maximum resident set (getrusage ru_maxrss) over the forward and backward, above what
it held with the inputs built (Python, torch, the inputs: the same in every variant).
Variants: "plain" (logits [tokens, vocab], log_softmax, entropy), "plain_logp_only" (the
trainer's plain path: gather - logsumexp, no entropy) and "chunked" (both outputs, `--chunk`
tokens at a time). The chunked values and gradients are compared with the plain ones.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from parts.report import add_args, cpu, write_json

from posttrain.machine import cpu_line
from posttrain.train.chunked import chunked_logprobs, plain_logprobs

VOCAB, HIDDEN = 49_152, 576


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _logp_only(hidden, weight, targets):
    logits = (hidden @ weight.t()).float()
    return logits.gather(1, targets[:, None]).squeeze(1) - logits.logsumexp(-1), None


def run_variant(variant: str, tokens: int, chunk: int, out: Path) -> None:
    """In this (fresh) process: one forward and backward; writes peak, values and gradients."""
    torch.manual_seed(0)
    hidden = (torch.randn(tokens, HIDDEN) * 2).requires_grad_()
    weight = (torch.randn(VOCAB, HIDDEN) * 0.05).requires_grad_()
    targets = torch.randint(0, VOCAB, (tokens,))
    fns = {"plain": lambda: plain_logprobs(hidden, weight, targets),
           "plain_logp_only": lambda: _logp_only(hidden, weight, targets),
           "chunked": lambda: chunked_logprobs(hidden, weight, targets, 1.0, chunk)}
    before = _maxrss_mb()
    lp, ent = fns[variant]()
    loss = -lp.mean() + (0.0 if ent is None else 0.01 * ent.mean())
    loss.backward()
    peak = _maxrss_mb() - before
    torch.save({"peak_mb": peak, "base_mb": before, "lp": lp.detach(),
                "ent": None if ent is None else ent.detach(),
                "grad_hidden": hidden.grad, "grad_weight": weight.grad}, out)


def _in_fresh_process(variant: str, tokens: int, chunk: int, tmp: Path) -> dict:
    out = tmp / f"{variant}.pt"
    subprocess.run([sys.executable, __file__, "--variant", variant, "--tokens", str(tokens),
                    "--chunk", str(chunk), "--out", str(out)], check=True)
    return torch.load(out)


def measure(tokens: int, chunk: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        runs = {v: _in_fresh_process(v, tokens, chunk, Path(tmp))
                for v in ("plain", "plain_logp_only", "chunked")}
    plain, chunked = runs["plain"], runs["chunked"]
    grad_diff = max(float((plain[k] - chunked[k]).abs().max()) for k in ("grad_hidden", "grad_weight"))
    return {"tokens": tokens, "vocab": VOCAB, "hidden": HIDDEN, "chunk": chunk,
            "peak_mb_plain": round(plain["peak_mb"], 1),
            "peak_mb_plain_logp_only": round(runs["plain_logp_only"]["peak_mb"], 1),
            "peak_mb_chunked": round(chunked["peak_mb"], 1),
            "ratio": round(plain["peak_mb"] / chunked["peak_mb"], 2),
            "ratio_vs_logp_only": round(runs["plain_logp_only"]["peak_mb"] / chunked["peak_mb"], 2),
            "base_mb": round(plain["base_mb"], 1),
            "max_abs_diff_logp": float((plain["lp"] - chunked["lp"]).abs().max()),
            "max_abs_diff_entropy": float((plain["ent"] - chunked["ent"]).abs().max()),
            "max_abs_diff_grad": grad_diff,
            "max_abs_grad": max(float(plain[k].abs().max()) for k in ("grad_hidden", "grad_weight"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_args(parser, "1,024 tokens instead of 4,096")
    parser.add_argument("--chunk", type=int, default=512, help="tokens per chunk")
    parser.add_argument("--tokens", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:  # the child process of one variant
        run_variant(args.variant, args.tokens, args.chunk, args.out)
        return
    result = {"cpu": cpu()} | measure(1024 if args.quick else 4096, args.chunk)
    print(cpu_line(result["cpu"]))
    for k, v in result.items():
        if k != "cpu":
            print(f"{k:>24}: {v}")
    write_json(args.json, result)


if __name__ == "__main__":
    main()
