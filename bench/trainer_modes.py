"""Trainer transforms on a real model: bf16 against fp32 compute, LoRA against full fine-tuning,
each a whole run of the SmolLM2 recipe (examples/smollm2_instruct.toml), seed 0, side by side.

    python bench/trainer_modes.py --json bench/results/trainer_modes.json           # 24 steps per arm
    python bench/trainer_modes.py --quick --json bench/results/trainer_modes_quick.json  # 8 steps

Each arm is `posttrain rl` on the recipe in a child process, as a user runs it; only the keys
named change (ARMS):
- recipe: the example as it is (bf16 autocast over fp32 master weights, LoRA rank 16, lr 5e-4).
- fp32: optim.compute_dtype = "fp32".
- full: optim.lora_rank = 0 and optim.lr = 5e-5, LoRA's lr / 10, the ratio of the best LoRA to
  the best full fine-tuning lr in Schulman et al., "LoRA Without Regret" (2025); chosen before
  measuring, not tuned here.

Per arm: the trainer's step (forward = log-probabilities, backward; metrics.jsonl), the whole
step's wall time, the run process's peak RSS (os.wait4), trainable parameters, the greedy held-out
partial and strict scores before and after with the paired difference, and the reward curve.
Between arms: fp32's trainer step over bf16's, the reward curves' difference (bf16 - fp32, a
t-interval over steps), and LoRA against full: step, memory and the paired held-out difference
of the two final policies. Every arm samples with the recipe's engine (bf16 where the CPU has it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from parts.instruct_tasks import EXAMPLE, make_tasks
from parts.report import add_args, cpu, write_json

from posttrain.evals.stats import paired_compare
from posttrain.recipes.summary import RunSummary

ARMS = {"recipe": [], "fp32": ['optim.compute_dtype="fp32"'], "full": ["optim.lora_rank=0", "optim.lr=5e-5"]}
STEPS = {"quick": 8, "full": 24}


def run_arm(name: str, sets: list[str], tasks: tuple[Path, Path], out: Path, steps: int) -> dict:
    """One `posttrain rl` child; its summary, step times and peak RSS."""
    args = [sys.executable, "-m", "posttrain", "rl", str(EXAMPLE), "--overwrite"]
    for s in [f'runs_dir="{out}"', f'name="{name}"', f'tasks.path="{tasks[0]}"', f'tasks.eval_path="{tasks[1]}"',
              f"rollout.steps={steps}", f"rollout.checkpoint_every={steps}", *sets]:
        args += ["--set", s]
    log = (out / f"{name}.log").open("w")
    child = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"arm {name} failed: see {out / f'{name}.log'}")
    run_dir = out / name
    summary = RunSummary.read(run_dir)
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    mean = lambda key: round(sum(r[key] for r in rows[1:]) / (len(rows) - 1), 2)  # noqa: E731  (step 0 warms up)
    return {"sets": sets, "steps": len(rows), "trainer_step_s": round(mean("forward_s") + mean("backward_s"), 2),
            "forward_s": mean("forward_s"), "backward_s": mean("backward_s"), "step_wall_s": mean("step_wall_s"),
            "peak_rss_mb": round(usage.ru_maxrss / 1024),
            "trainable_params": summary.recipe["trainer"].get("trainable_params"),
            "compute_dtype": summary.recipe["trainer"]["compute_dtype"], "engine_dtype": summary.engine["dtype"],
            **{k: round(summary.gain[k], 4) for k in ("heldout_partial_before", "heldout_partial_after",
                                                      "heldout_strict_before", "heldout_strict_after",
                                                      "paired_diff", "paired_ci_low", "paired_ci_high")},
            "wall_s": summary.wall_s, "reward_curve": [round(r["reward_mean"], 4) for r in rows],
            "after_scores": summary.eval_after["scores"]}


def rounded(d) -> dict:
    return {"diff": round(d.diff, 4), "ci_low": round(d.ci_low, 4), "ci_high": round(d.ci_high, 4),
            "p": round(d.p_value, 3)}


def compare(arms: dict) -> dict:
    rec, fp32, full = arms["recipe"], arms["fp32"], arms["full"]
    curves = paired_compare({i: [r] for i, r in enumerate(rec["reward_curve"])},
                            {i: [r] for i, r in enumerate(fp32["reward_curve"])})
    held = paired_compare(rec["after_scores"], full["after_scores"])
    return {"bf16_over_fp32_trainer_step": round(fp32["trainer_step_s"] / rec["trainer_step_s"], 2),
            "bf16_over_fp32_step_wall": round(fp32["step_wall_s"] / rec["step_wall_s"], 2),
            "reward_curve_bf16_minus_fp32": rounded(curves) | {"over": "steps"},
            "full_over_lora_trainer_step": round(full["trainer_step_s"] / rec["trainer_step_s"], 2),
            "full_over_lora_peak_rss": round(full["peak_rss_mb"] / rec["peak_rss_mb"], 2),
            "heldout_lora_minus_full": rounded(held) | {"lora": round(held.mean_a, 4), "full": round(held.mean_b, 4)}}


def print_table(result: dict) -> None:
    print(f"{'arm':>7} {'trainer s':>9} {'step s':>7} {'RSS MB':>7} {'params':>11} {'partial before→after':>21} "
          f"{'paired diff [95% CI]':>24}")
    for name, a in result["arms"].items():
        ci = f"{a['paired_diff']:+.3f} [{a['paired_ci_low']:+.3f}, {a['paired_ci_high']:+.3f}]"
        print(f"{name:>7} {a['trainer_step_s']:>9.1f} {a['step_wall_s']:>7.1f} {a['peak_rss_mb']:>7} "
              f"{a['trainable_params']:>11} {a['heldout_partial_before']:>10.3f} → {a['heldout_partial_after']:.3f} {ci:>24}")
    if c := result.get("compare"):
        print(json.dumps(c, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "8 steps per arm")
    ap.add_argument("--out", type=Path, default=Path("runs/bench-trainer-modes"))
    ap.add_argument("--tasks", type=int, nargs=2, default=(512, 300), metavar=("TRAIN", "HELDOUT"))
    a = ap.parse_args()
    t0 = time.perf_counter()
    size = "quick" if a.quick else "full"
    tasks = make_tasks(a.out / "tasks", *a.tasks)
    result: dict = {"size": size, "cpu": cpu(), "recipe": EXAMPLE.name, "steps": STEPS[size], "tasks": list(a.tasks),
                    "arms": {}}
    arms = {}
    for name, sets in ARMS.items():
        arms[name] = run_arm(name, sets, tasks, a.out, STEPS[size])
        result["arms"][name] = {k: v for k, v in arms[name].items() if k != "after_scores"}
        print(f"[{name}] {json.dumps(result['arms'][name])}", flush=True)
        write_json(a.json, result)
    result["compare"] = compare(arms)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    write_json(a.json, result)
    print_table(result)


if __name__ == "__main__":
    main()
