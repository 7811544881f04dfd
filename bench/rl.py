"""RL pipeline benchmark: async vs sync rollouts, and posttrain vs TRL's GRPOTrainer, on CPU.

    python bench/rl.py --quick --json runs/bench-rl.json    # a few minutes on an idle machine
    python bench/rl.py                                       # larger budgets

async_vs_sync: terminal-basics tasks whose tests/test.sh sleeps 0.5-2 s (as real test
suites take time), the same warm-started tiny model, the same steps, B and G; trajectories
trained per second of RL wall time, and held-out pass@1 after.
vs_trl: the single-turn "copy" task and its similarity reward, the same tiny model (SFT'd
120 steps), G, batch, max tokens, lr and steps; TRL GRPOTrainer (installed for the benchmark
only, the faster of 1 and 2 torch threads) against `posttrain rl` async (max_staleness 1, the
engine in a child process on its own core) and sync. TRL comes from the bench extra:
`pip install -c constraints.txt -e '.[bench]'`. Trajectories trained per second (median
of the repeats, run interleaved), the training reward over the last quarter of the steps, and
the held-out reward after (64 prompts x 4 samples, the same evaluation for every model).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch
from parts.report import add_args, cpu, write_json

from posttrain.engine.paged.local import LocalEngine
from posttrain.evals.stats import paired_compare
from posttrain.models.tiny import load_policy, save_policy
from posttrain.recipes.rl.run import evaluate, run_rl
from posttrain.recipes.rl.config import load_rl_config
from posttrain.recipes.rl.env import build_env
from posttrain.recipes.rl.heldout import single_turn_scores
from posttrain.rollout.envs import Prompt
from posttrain.rollout.single_turn import copy_prompts, similarity_reward
from posttrain.tasks.suites import terminal_basics
from posttrain.train.checkpoint import latest_checkpoint

SIZES = {
    "quick": dict(n_tasks=18, n_eval=12, steps=6, groups=2, group=4, max_turns=3, sft=150, workers=6,
                  refill=8, trl_steps=100, trl_groups=4, trl_tokens=8, repeat=3),
    "full": dict(n_tasks=48, n_eval=16, steps=16, groups=4, group=4, max_turns=3, sft=200, workers=6,
                 refill=8, trl_steps=300, trl_groups=4, trl_tokens=8, repeat=5),
}
# The single-step families: a warm-started tiny model solves some of them, so groups carry signal.
FAMILIES = ["create-file", "make-dir", "copy-file"]


def slow_verifier_tasks(root: Path, n: int, seed: int, lo: float, hi: float) -> Path:
    """terminal-basics tasks whose test.sh first sleeps U(lo, hi) seconds."""
    rng = random.Random(seed)
    for task in terminal_basics.generate(root, n, seed=seed, split="slow", families=FAMILIES):
        test = root / task.id / "tests" / "test.sh"
        shebang, rest = test.read_text().split("\n", 1)
        test.write_text(f"{shebang}\nsleep {rng.uniform(lo, hi):.2f}\n{rest}")
    return root


def warm_policy(overrides: list[str], out: Path) -> Path:
    """Build the environment once (oracle demos + SFT) and save the policy for every run."""
    cfg = load_rl_config(None, overrides)
    _, _, model, tok, _ = build_env(cfg, out, None)
    return save_policy(model, tok, out / "init")


def run_mode(overrides: list[str], name: str) -> dict:
    cfg = load_rl_config(None, overrides + [f'name="{name}"'])
    summary = run_rl(cfg, overwrite=True)
    rows = [json.loads(x) for x in (cfg.run_dir / "metrics.jsonl").open()]
    wall = rows[-1]["elapsed_s"]
    tail = rows[len(rows) * 3 // 4:] or rows
    finished = sum(v for k, v in rows[-1].items() if k.startswith("finished_"))
    return {"trajectories": summary["trajectories"], "rl_wall_s": round(wall, 2),
            "trajectories_per_s": round(summary["trajectories"] / wall, 3),
            "generated": finished, "generated_per_s": round(finished / wall, 3),
            "skipped_steps": sum(r["skipped"] for r in rows),
            "reward_last_quarter": round(sum(r["reward_mean"] for r in tail) / len(tail), 4),
            "eval_after": summary["eval_after"], "eval_before": summary["eval_before"],
            "trainer_idle_frac": round(sum(r["trainer_idle_frac"] for r in rows) / len(rows), 3),
            "sampler_idle_frac": round(sum(r["sampler_idle_frac"] for r in rows) / len(rows), 3),
            "staleness_mean": round(sum(r["staleness_mean"] for r in rows) / len(rows), 3),
            "partial_rollout_frac": round(sum(r["partial_rollout_frac"] for r in rows) / len(rows), 3)}


def async_vs_sync(size: dict, out: Path) -> dict:
    tasks = slow_verifier_tasks(out / "tasks", size["n_tasks"] + size["n_eval"], 0, 0.5, 2.0)
    base = [f'runs_dir="{out}"', "threads=1", 'tasks.kind="dir"', f'tasks.path="{tasks}"',
            f"tasks.n_eval={size['n_eval']}", "tasks.eval_samples=4", f"agent.max_turns={size['max_turns']}",
            f"policy.sft_steps={size['sft']}", f"rollout.steps={size['steps']}",
            f"rollout.groups_per_step={size['groups']}", f"rollout.group_size={size['group']}",
            f"rollout.max_refill_rounds={size['refill']}", 'algo.loss="dr_grpo"', "optim.lr=3e-4"]
    init = warm_policy(base, out / "warm")
    base += [f'policy.init="{init}"']
    sync = run_mode(base + ["rollout.max_staleness=0", "rollout.overprovision=0"], "sync")
    asyn = run_mode(base + ["rollout.max_staleness=2", f"rollout.workers={size['workers']}",
                            "rollout.groups_per_wave=1", "rollout.overprovision=1"], "async")
    ratio = asyn["trajectories_per_s"] / max(sync["trajectories_per_s"], 1e-9)
    return {"ratio": round(ratio, 2),
            "generated_ratio": round(asyn["generated_per_s"] / max(sync["generated_per_s"], 1e-9), 2),
            "sync": sync, "async": asyn,
            "settings": {**size, "verifier_sleep_s": [0.5, 2.0], "async": f"max_staleness 2, {size['workers']} workers"}}


def trl_flags(size: dict, lr: float) -> dict:
    """Every GRPOConfig field the run sets (all else TRL's default; no vLLM): the JSON's peer_flags."""
    g, b = size["group"], size["trl_groups"]
    return dict(per_device_train_batch_size=b * g, num_generations=g, max_completion_length=size["trl_tokens"],
                learning_rate=lr, max_steps=size["trl_steps"], use_cpu=True, report_to="none", logging_steps=1,
                beta=0.0, temperature=1.0, loss_type="grpo", save_strategy="no", seed=0, optim="adamw_torch",
                lr_scheduler_type="constant", max_grad_norm=1.0, weight_decay=0.0, adam_beta2=0.99)


def trl_run(init: Path, prompts: list[Prompt], size: dict, out: Path, lr: float,
            held_out) -> tuple[dict, object]:
    """(TRL GRPOTrainer's rate and rewards, its final model)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer, __version__

    model, tok = load_policy(init)
    data = Dataset.from_list([{"prompt": p.text, "target": p.target} for p in prompts])

    def reward(completions, target, **_):
        return [similarity_reward(c, Prompt("", "", t)).value for c, t in zip(completions, target)]

    g, b = size["group"], size["trl_groups"]
    flags = trl_flags(size, lr)
    args = GRPOConfig(output_dir=str(out / "trl"), **flags)
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=data,
                          processing_class=tok)
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    tail = rewards[len(rewards) * 3 // 4:] or rewards
    n = size["trl_steps"] * b * g
    return {"trl_version": __version__, "trajectories": n, "train_wall_s": round(wall, 2),
            "trajectories_per_s": round(n / wall, 3),
            "reward_last_quarter": round(sum(tail) / len(tail), 4), "reward_first": rewards[0],
            "eval_after": held_out(trainer.model.eval())}, trainer.model


def held_out_eval(cfg, out: Path):
    """(model -> the held-out reward (mean and task-clustered CI) that `posttrain rl` reports
    after a run, model -> each held-out prompt's rewards): the same prompts, samples per
    prompt, engine and seed."""
    _, held, _, tok, _ = build_env(cfg, out, None)
    return (lambda model: evaluate(held, LocalEngine(model, tok), cfg, cfg.seed + 424_242),
            lambda model: single_turn_scores(held, LocalEngine(model, tok), cfg.seed + 424_242)[0])


def paired_held_out(scores_of, ours_run_dir: Path, trl_model) -> dict:
    """Ours minus TRL on the same held-out prompts (paired by prompt, t-interval)."""
    ours = load_policy(latest_checkpoint(ours_run_dir) / "model")[0].eval()
    d = paired_compare(scores_of(ours), scores_of(trl_model.eval()))
    return {"ours": round(d.mean_a, 4), "trl": round(d.mean_b, 4), "diff": round(d.diff, 4),
            "ci_low": round(d.ci_low, 4), "ci_high": round(d.ci_high, 4), "p": round(d.p_value, 3),
            "n_tasks": d.n_tasks}


def _median_rate(runs: list[dict]) -> float:
    return round(statistics.median(r["trajectories_per_s"] for r in runs), 3)


def vs_trl(size: dict, out: Path) -> dict:
    lr = 1e-3
    base = [f'runs_dir="{out}"', "threads=1", 'tasks.kind="copy"', "tasks.n_train=64", "tasks.n_eval=64",
            "tasks.eval_samples=4", f"tasks.max_tokens={size['trl_tokens']}", "policy.sft_steps=120",
            f"rollout.steps={size['trl_steps']}", f"rollout.groups_per_step={size['trl_groups']}",
            f"rollout.group_size={size['group']}", 'algo.loss="grpo"', f"optim.lr={lr}",
            # TRL trains on every group, flat ones included (zero advantage): so do we here.
            "rollout.filter_zero_variance=false"]
    init = warm_policy(base, out / "warm")
    base += [f'policy.init="{init}"']
    # Async: the engine in a child process (on a core of its own) generates the next batch
    # (one wave = B groups) while the trainer computes on the other core.
    async_cfg = base + ["rollout.max_staleness=1", "rollout.workers=1", "rollout.overprovision=0",
                        f"rollout.groups_per_wave={size['trl_groups']}", 'engines.kind="process"']
    ours_sync = run_mode(base + ["rollout.max_staleness=0", "rollout.overprovision=0"], "ours-sync")
    held_out, scores_of = held_out_eval(load_rl_config(None, base), out / "trl-eval")
    ours, trl, paired = [], {1: [], 2: []}, None
    for r in range(size["repeat"]):  # interleaved, so that both sides see the same machine
        ours.append(run_mode(async_cfg, f"ours-async-{r}"))
        for threads in (1, 2):  # TRL is one process: give it both cores too, keep the faster
            torch.set_num_threads(threads)
            try:
                result, trl_model = trl_run(init, copy_prompts(64, 0), size, out, lr, held_out)
                trl[threads].append(result)
            except Exception as e:  # reported, not hidden: the JSON says why there is no ratio
                return {"ratio": None, "error": f"TRL did not run: {type(e).__name__}: {e}",
                        "ours_sync": ours_sync, "ours_async": ours}
            finally:
                torch.set_num_threads(1)
            paired = paired or paired_held_out(scores_of, out / "ours-async-0", trl_model)
    trl_best = max(_median_rate(runs) for runs in trl.values())
    return {"ratio": round(_median_rate(ours) / trl_best, 2),
            "ratio_sync": round(ours_sync["trajectories_per_s"] / trl_best, 2),
            "ours_async_traj_per_s": _median_rate(ours), "trl_traj_per_s": trl_best,
            "held_out_ours_minus_trl": paired,
            "peer_flags": {"trl_grpo_config": trl_flags(size, lr), "torch_threads": [1, 2]},
            "ours_async": ours, "ours_sync": ours_sync, "trl_1_thread": trl[1], "trl_2_threads": trl[2],
            "settings": {"group": size["group"], "groups_per_step": size["trl_groups"],
                         "max_tokens": size["trl_tokens"], "steps": size["trl_steps"], "lr": lr,
                         "loss": "grpo", "beta": 0.0, "temperature": 1.0, "sft_steps": 120,
                         "zero_variance_groups": "trained on, as TRL does (rollout.filter_zero_variance false)",
                         "repeats": size["repeat"], "rate": "median over the repeats",
                         "ours_async": "max_staleness 1, engine in a child process on its own core, "
                                       "1 thread each",
                         "trl": "the faster of 1 and 2 torch threads (by median)"}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "the SIZES quick budgets (a few minutes on an idle machine)")
    ap.add_argument("--out", type=Path, default=Path("runs/bench-rl"))
    ap.add_argument("--only", choices=["async_vs_sync", "vs_trl"])
    a = ap.parse_args()
    size = SIZES["quick" if a.quick else "full"]
    # One intra-op thread per process (TRL also gets a 2-thread run): on a shared 2-core
    # machine two OpenMP threads per process stall at barriers and make timings meaningless.
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    if a.only in (None, "vs_trl") and importlib.util.find_spec("trl") is None:
        sys.exit("bench/rl.py vs_trl needs TRL: pip install -c constraints.txt -e '.[bench]'"
                 " (or --only async_vs_sync)")
    result = {"size": "quick" if a.quick else "full", "torch": torch.__version__, "threads": 1, "cpu": cpu()}
    if a.only in (None, "async_vs_sync"):
        result["async_vs_sync"] = async_vs_sync(size, a.out / "async_vs_sync")
        print("async_vs_sync", json.dumps(result["async_vs_sync"]), flush=True)
    if a.only in (None, "vs_trl"):
        result["vs_trl"] = vs_trl(size, a.out / "vs_trl")
        print("vs_trl", json.dumps(result["vs_trl"]), flush=True)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    write_json(a.json, result)
    json.dump({k: v.get("ratio") if isinstance(v, dict) else v for k, v in result.items()}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
