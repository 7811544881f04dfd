"""Where a base model has a learning signal on the `instruct` suite: SmolLM2-135M-Instruct's
pass rate per constraint family, before any RL, to choose the training mix from.

    flock /tmp/posttrain-bench.lock nice -n 19 python bench/instruct_base.py \
        [--model DIR] [--n 300] [-k 8] [--knob max_constraints=1 ...] [--quick] [--json PATH]

It generates `--n` train-split prompts (`posttrain tasks generate --suite instruct`, seed 0,
one to three constraints unless `--knob` says otherwise), frames each in the model's own chat template, samples k replies
per prompt with the embedded engine (temperature 1, the RL rollout setting) and scores them
with the suite's checker. Per family: pass@k (a prompt counts when one of its k replies meets
that family's constraint) and the mean share of replies that meet it. Per prompt: strict
pass@k, mean partial reward, and the share of prompts whose k rewards are not all equal
(GRPO's groups with a signal), overall and by number of constraints.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from parts.report import add_args, cpu, write_json

from posttrain.agent.framing import single_turn
from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import LocalEngine
from posttrain.models.tiny import load_policy
from posttrain.rollout.single_turn import reply_score, task_prompts
from posttrain.tasks.suites import generate


def sample(engine, tokenizer, prompts, k: int, max_tokens: int, batch: int, seed: int):
    """k decoded replies per prompt, `batch` prompts (x k) per generate call."""
    frame_end = single_turn(tokenizer)[1]
    out = []
    for i in range(0, len(prompts), batch):
        chunk = prompts[i:i + batch]
        ids = [tokenizer.encode(p.text, add_special_tokens=False) for p in chunk for _ in range(k)]
        params = SamplingParams(temperature=1.0, max_tokens=max_tokens, seed=seed + i,
                                stop_token_ids=[frame_end])
        comps = engine.generate(ids, params)
        texts = [tokenizer.decode([t for t in c.token_ids if t != frame_end], skip_special_tokens=True)
                 for c in comps]
        out += [texts[j * k:(j + 1) * k] for j in range(len(chunk))]
        print(f"  {min(i + batch, len(prompts))}/{len(prompts)} prompts", flush=True)
    return out


def tally(prompts, replies) -> dict:
    """Per family and per prompt size: pass@k, mean met / partial, groups with variance."""
    fam = defaultdict(lambda: {"prompts": 0, "pass_at_k": 0, "met": 0.0})
    size = defaultdict(lambda: {"prompts": 0, "strict_pass_at_k": 0, "partial": 0.0, "varied": 0})
    for p, group in zip(prompts, replies):
        scores = [(s.value, s.details) for s in (reply_score(r, p) for r in group)]
        rewards = [s[0] for s in scores]
        families = [k.removeprefix("met:") for k in scores[0][1] if k.startswith("met:")]
        row = size[len(families)]
        row["prompts"] += 1
        row["strict_pass_at_k"] += any(d["strict"] for _, d in scores)
        row["partial"] += sum(rewards) / len(rewards)
        row["varied"] += len(set(rewards)) > 1
        for f in families:
            met = [d[f"met:{f}"] for _, d in scores]
            fam[f]["prompts"] += 1
            fam[f]["pass_at_k"] += any(met)
            fam[f]["met"] += sum(met) / len(met)
    per_family = {f: {"prompts": r["prompts"], "pass_at_k": r["pass_at_k"] / r["prompts"],
                      "mean_met": r["met"] / r["prompts"]} for f, r in sorted(fam.items())}
    per_size = {n: {"prompts": r["prompts"], "strict_pass_at_k": r["strict_pass_at_k"] / r["prompts"],
                    "mean_partial": r["partial"] / r["prompts"], "groups_with_variance": r["varied"] / r["prompts"]}
                for n, r in sorted(size.items())}
    return {"per_family": per_family, "per_constraints": per_size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=Path.home() / ".cache/posttrain/models/smollm2-135m-instruct")
    ap.add_argument("--n", type=int, default=300, help="prompts")
    ap.add_argument("-k", type=int, default=8, help="replies per prompt (pass@k)")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8, help="prompts per generate call")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--knob", action="append", default=[], help="suite knob KEY=VALUE (repeatable)")
    add_args(ap, "24 prompts, k=8, replies up to 128 tokens")
    args = ap.parse_args()
    if args.quick:
        args.n, args.max_tokens = 24, 128
    machine = cpu(loadavg_1m=os.getloadavg()[0])
    with tempfile.TemporaryDirectory(prefix="instruct-base-") as tmp:
        tasks = generate("instruct", Path(tmp) / "tasks", args.n, seed=args.seed, knobs=args.knob)
    model, tokenizer = load_policy(args.model)
    prompts = task_prompts(tasks, single_turn(tokenizer)[0])
    t0 = time.perf_counter()
    replies = sample(LocalEngine(model, tokenizer), tokenizer, prompts, args.k, args.max_tokens,
                     args.batch, args.seed)
    result = tally(prompts, replies)
    for f, r in result["per_family"].items():
        print(f"{f:14} {r['prompts']:4d} prompts  pass@{args.k} {r['pass_at_k']:.3f}  met {r['mean_met']:.3f}")
    for n, r in result["per_constraints"].items():
        print(f"{n} constraint(s) {r['prompts']:4d} prompts  strict pass@{args.k} {r['strict_pass_at_k']:.3f}  "
              f"partial {r['mean_partial']:.3f}  groups with variance {r['groups_with_variance']:.3f}")
    write_json(args.json, {"cpu": machine, "model": str(args.model), "n": args.n, "k": args.k, "knobs": args.knob,
                           "max_tokens": args.max_tokens, "temperature": 1.0, "seed": args.seed,
                           "checker": "if-verifiable==0.1.2", "wall_s": round(time.perf_counter() - t0, 1),
                           "quick": args.quick, **result, "example_reply": replies[0][0][:400]})


if __name__ == "__main__":
    main()
