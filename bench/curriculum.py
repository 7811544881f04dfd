"""Curriculum from a validation manifest against uniform sampling, in real `posttrain rl` runs.

    python bench/curriculum.py --quick --json bench/results/curriculum_quick.json

terminal-basics tasks (easy single-step and harder families in one domain), one warm-started
tiny model. The manifest is that model's own pass rate on each training task (k episodes,
as `posttrain validate`'s difficulty calibration records it). Two runs from the same policy,
seed, steps, B and G: `[schedule] curriculum = true` with the manifest, and uniform sampling.

Headline, chosen before the runs: held-out pass@1 after RL, curriculum minus uniform (the
same held-out tasks and samples). Also reported: the share of training groups with signal
(rewards not all equal), which is what the curriculum's weights aim at.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from parts.report import add_args, write_json

from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import LocalEngine
from posttrain.evals.quick import evaluate_pass_at_1, pass_scores
from posttrain.models.tiny import save_policy
from posttrain.recipes.rl.run import run_rl
from posttrain.recipes.rl.config import load_rl_config
from posttrain.recipes.rl.env import build_env

SIZES = {"quick": dict(n_train=18, n_eval=12, steps=8, groups=2, group=4, sft=150, k=4),
         "full": dict(n_train=36, n_eval=16, steps=20, groups=4, group=4, sft=200, k=8)}
FAMILIES = ["create-file", "make-dir", "copy-file", "find-word", "count-lines", "config-value"]


def base_overrides(size: dict, out: Path) -> list[str]:
    return [f'runs_dir="{out}"', "threads=1", "seed=0", 'tasks.kind="terminal-basics"',
            f"tasks.n_eval={size['n_eval']}", "tasks.eval_samples=4", "agent.max_turns=3",
            f"policy.sft_steps={size['sft']}", f"rollout.steps={size['steps']}",
            f"rollout.groups_per_step={size['groups']}", f"rollout.group_size={size['group']}",
            "rollout.max_refill_rounds=8", 'algo.loss="dr_grpo"', "optim.lr=3e-4"]


def domain(size: dict, manifest: Path | None) -> dict:
    d = {"name": "mixed", "source": "terminal-basics", "n_train": size["n_train"],
         "options": {"families": FAMILIES}}
    return d | ({"manifest": str(manifest)} if manifest else {})


def config(overrides: list[str], size: dict, manifest: Path | None, curriculum: bool):
    from posttrain.recipes.rl.config import DomainConfig

    cfg = load_rl_config(None, overrides + [f"schedule.curriculum={str(curriculum).lower()}"])
    return cfg.model_copy(update={"domains": [DomainConfig(**domain(size, manifest))]})


def warm_and_calibrate(size: dict, out: Path) -> tuple[Path, Path, dict]:
    """(the warm policy, a manifest of its pass rate on every training task, the rates)."""
    cfg = config(base_overrides(size, out), size, None, curriculum=False)
    parts = build_env(cfg, out / "warm", None)
    init = save_policy(parts.model, parts.tokenizer, out / "warm" / "init")
    env = parts.env
    params = SamplingParams(temperature=cfg.rollout.temperature, seed=7)
    _, episodes = evaluate_pass_at_1(env.tasks, LocalEngine(parts.model, parts.tokenizer), env.framer,
                                     size["k"], params, env.agent)
    scores = pass_scores(episodes)
    manifest = out / "manifest.json"
    manifest.write_text(json.dumps({"version": 1, "tasks": [
        {"id": t, "status": "ok", "difficulty": {"successes": int(sum(s)), "n": len(s)}}
        for t, s in scores.items()]}))
    return init, manifest, {t: sum(s) / len(s) for t, s in scores.items()}


def signal_share(run_dir: Path) -> float:
    """Finished training groups whose rewards were not all equal."""
    groups = [json.loads(x) for x in (run_dir / "events.jsonl").open()]
    rewards = [e["rewards"] for e in groups if e.get("event") == "finish" and e.get("rewards")]
    return round(sum(len(set(r)) > 1 for r in rewards) / max(1, len(rewards)), 3)


def arm(overrides, size, manifest, curriculum: bool, name: str) -> dict:
    cfg = config(overrides + [f'name="{name}"'], size, manifest, curriculum)
    summary = run_rl(cfg, overwrite=True)
    return {"eval_before": summary["eval_before"], "eval_after": summary["eval_after"],
            "signal_share": signal_share(cfg.run_dir), "trajectories": summary["trajectories"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(parser)
    parser.add_argument("--out", type=Path, default=Path("runs/bench-curriculum"))
    args = parser.parse_args()
    size = SIZES["quick" if args.quick else "full"]
    init, manifest, rates = warm_and_calibrate(size, args.out)
    overrides = base_overrides(size, args.out) + [f'policy.init="{init}"']
    result = {"settings": size | {"families": FAMILIES, "headline": "held-out pass@1 after, curriculum - uniform"},
              "manifest_pass_rates": rates}
    result["uniform"] = arm(overrides, size, None, False, "uniform")
    write_json(args.json, result)
    result["curriculum"] = arm(overrides, size, manifest, True, "curriculum")
    after = {k: result[k]["eval_after"]["pass_at_1"] for k in ("uniform", "curriculum")}
    result["headline_diff"] = round(after["curriculum"] - after["uniform"], 4)
    write_json(args.json, result)
    print(json.dumps({k: result[k] for k in ("headline_diff",)} | after))


if __name__ == "__main__":
    main()
