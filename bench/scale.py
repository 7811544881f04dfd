"""Scale-out benchmark: the Ray executor against the local executor, and 4 sandbox actors
against 1, on sandbox tasks whose verifiers sleep 0.5-2 s (they wait, not compute).

    pip install -e '.[ray]'
    python bench/scale.py --quick --json runs/bench-scale.json

One run, side by side, the same warm-started tiny model, tasks, steps, B, G and staleness:
- local: `posttrain rl` async with W rollout threads (cluster.executor = "local");
- ray_W: the same with cluster.executor = "ray": W sandbox actors (one wave each) that all
  generate on one engine-replica actor;
- ray_1: one sandbox actor (and one rollout thread), the same one engine replica.
`ray_vs_local` = trajectories trained per second of RL wall time, ray_W / local (the Ray
overhead); `sandbox_actors_4_vs_1` = episodes rolled out per second, ray_W / ray_1.
The Ray start (a few seconds) is outside the RL wall time, as the engine start is.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from parts.report import add_args, cpu, write_json
from rl import run_mode, slow_verifier_tasks, warm_policy

SIZES = {
    "quick": dict(n_tasks=16, steps=6, groups=2, group=2, max_turns=2, sft=40, actors=4),
    "full": dict(n_tasks=32, steps=12, groups=4, group=2, max_turns=2, sft=80, actors=4),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_args(ap, "16 tasks, 6 steps, 2 groups (not 32, 12, 4)")
    ap.add_argument("--out", type=Path, default=Path("runs/bench-scale"))
    args = ap.parse_args()
    size = SIZES["quick" if args.quick else "full"]
    load0 = os.getloadavg()[0]
    out = args.out.resolve()
    tasks = slow_verifier_tasks(out / "tasks", size["n_tasks"], 0, 0.5, 2.0)
    base = [f'runs_dir="{out}"', "threads=1", 'tasks.kind="dir"', f'tasks.path="{tasks}"', "tasks.n_eval=0",
            f"agent.max_turns={size['max_turns']}", f"policy.sft_steps={size['sft']}",
            f"rollout.steps={size['steps']}", f"rollout.groups_per_step={size['groups']}",
            f"rollout.group_size={size['group']}", "rollout.max_staleness=2", "rollout.groups_per_wave=1",
            "rollout.overprovision=2", "rollout.max_refill_rounds=8", "rollout.filter_zero_variance=false",
            'algo.loss="dr_grpo"', "optim.lr=3e-4"]
    init = warm_policy(base, out / "warm")
    base += [f'policy.init="{init}"', "policy.sft_steps=0"]
    n = size["actors"]
    ray = ['cluster.executor="ray"', "cluster.num_cpus=4", "cluster.sandbox_cpus=0.5",
           "cluster.engine_replicas=1", "cluster.start_timeout_s=600"]
    runs = {"local": run_mode(base + [f"rollout.workers={n}"], "local"),
            f"ray_{n}": run_mode(base + ray + [f"rollout.workers={n}", f"cluster.sandbox_actors={n}"], f"ray{n}"),
            "ray_1": run_mode(base + ray + ["rollout.workers=1", "cluster.sandbox_actors=1"], "ray1")}
    rn = runs[f"ray_{n}"]
    result = {"ray_vs_local": round(rn["trajectories_per_s"] / max(runs["local"]["trajectories_per_s"], 1e-9), 2),
              f"sandbox_actors_{n}_vs_1": round(rn["generated_per_s"] / max(runs["ray_1"]["generated_per_s"], 1e-9), 2),
              "runs": {k: {x: v[x] for x in ("trajectories", "rl_wall_s", "trajectories_per_s", "generated",
                                             "generated_per_s", "trainer_idle_frac", "staleness_mean")}
                       for k, v in runs.items()},
              "settings": {**size, "engine_replicas": 1, "verifier_sleep_s": [0.5, 2.0], "max_staleness": 2,
                           "overprovision": 2},
              "cpu": cpu(loadavg_1m=[load0, os.getloadavg()[0]])}
    write_json(args.json, result)  # first, so a printing error cannot lose the numbers
    print(f"{'run':<8} {'traj':>5} {'wall s':>7} {'traj/s':>7} {'episodes/s':>10}")
    for k, v in result["runs"].items():
        print(f"{k:<8} {v['trajectories']:>5} {v['rl_wall_s']:>7.1f} {v['trajectories_per_s']:>7.3f} "
              f"{v['generated_per_s']:>10.3f}")
    print(f"ray_vs_local = {result['ray_vs_local']}x   sandbox_actors_{n}_vs_1 = "
          f"{result[f'sandbox_actors_{n}_vs_1']}x   ({result['cpu']['model']})")


if __name__ == "__main__":
    main()
