"""Multi-domain scheduling benchmark: exact shares, curriculum, pick speed and state size,
over-provisioning on a long tail (real pipeline runs), and the simulator against them.

    flock /tmp/posttrain-bench.lock python bench/schedule.py --quick --json runs/bench-schedule.json

shares: 12 domains, B = 64, groups finishing out of order and 0-40% filtered per domain;
  the scheduler's plan against prime-rl's weighted random draw (worst 50-step window).
curriculum: a synthetic suite (4 domains x 100 tasks, known pass rates, a simulated policy
  that learns a task only from groups with mixed rewards), curriculum against uniform.
picks: 100,000 tasks in 500 domains with the curriculum on; p99 of next(), the JSON state
  with every task touched, and prime-rl's O(n) rescan per pick for comparison.
long tail (measured): the real Pipeline, a real tiny engine and trainer, verifiers that sleep
  lognormal times (sigma 1, median 0.12 trainer steps); over-provisioning (fixed, hedges, and
  hedges with partial rollouts) against none at the same staleness bound. The trainer's step
  is real compute on 64 episodes of 121 tokens each (bench/parts/schedule_workload.py).
simulator: costs fitted on one measured run predict the other runs (both measured); the
  worst error over the headline fit (`sim_error`), over every fit (`sim_error_all_fits`), and
  with each predicted run's own trainer step (`sim_error_own_step*`).
No dependency beyond the package.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

import torch
from parts.report import add_args, write_json
from parts.schedule_synthetic import curriculum_run, pick_speed, rescan_pick_ms, share_run, window_dev_pp
from parts.schedule_workload import measured_run, train_step_s

from posttrain.rollout.config import RolloutConfig
from posttrain.schedule.simulate import Costs, SimConfig, simulate

SIZES = {"quick": dict(share_steps=200, cur_steps=60, cur_seeds=3, picks=5000, tail_steps=25),
         "full": dict(share_steps=600, cur_steps=60, cur_seeds=5, picks=20000, tail_steps=50)}
# The verifier's median is VERIFY_STEPS trainer steps (measured at the start), so that the
# workload is balanced on any machine: with the long tail, none at s = 1 waits for the
# slowest of its B groups, while the trainer's step is as long as a batch's rollouts.
TAIL = dict(groups_per_step=8, group_size=8, sigma=1.0, obs_tokens=112)
VERIFY_STEPS = 0.12
HEDGE_AFTER = 1.5   # a group in flight 1.5x its domain's median group time is a straggler
CARRY_AFTER = 0.75  # with partial rollouts a straggler may be replaced sooner: it is not lost
HEADLINE = "carry_s1"   # the run whose numbers are the keys


def shares_section(size: dict) -> dict:
    rng = random.Random(0)
    raw = {f"d{i:02d}": rng.random() + 0.05 for i in range(12)}
    shares = {k: v / sum(raw.values()) for k, v in raw.items()}
    ours = window_dev_pp(share_run(shares, 64, size["share_steps"], 0, True), shares)
    drawn = window_dev_pp(share_run(shares, 64, size["share_steps"], 0, False), shares)
    exact_shares = {"a": 0.5, "b": 0.25, "c": 0.125, "d": 0.125}
    batches = share_run(exact_shares, 64, 100, 1, True)
    exact = sum(b == {"a": 32, "b": 16, "c": 8, "d": 8} for b in batches) / len(batches)
    return {"share_max_dev_pp": ours, "share_max_dev_pp_random_draw": drawn,
            "share_exact_step_frac": exact}


def curriculum_section(size: dict) -> dict:
    fracs, rows = [], []
    n = size["cur_steps"]
    for seed in range(size["cur_seeds"]):
        uniform, cur = curriculum_run(False, n, seed), curriculum_run(True, n, seed)
        k = next((i + 1 for i, x in enumerate(cur) if x >= uniform[-1]), None)
        fracs.append(k / n if k else float("inf"))
        rows.append({"seed": seed, "uniform_final": uniform[-1], "curriculum_final": cur[-1],
                     "steps_to_uniform_final": k})
    return {"curriculum_steps_frac": statistics.mean(fracs), "curriculum_steps_frac_max": max(fracs),
            "curriculum_runs": rows}


def picks_section(size: dict) -> dict:
    out = pick_speed(100_000, 500, size["picks"])
    out["rescan_pick_p99_ms"] = rescan_pick_ms(100_000, 200)
    return out


def tail_configs(b: int) -> dict[str, dict]:
    return {"sync": dict(max_staleness=0, overprovision=0, workers=1, groups_per_wave=b),
            "none_s1": dict(max_staleness=1, overprovision=0, workers=2 * b),
            "over_s1": dict(max_staleness=1, overprovision=b, workers=3 * b),
            "hedge_s1": dict(max_staleness=1, overprovision=b, workers=3 * b, hedge_after=HEDGE_AFTER),
            "carry_s1": dict(max_staleness=1, overprovision=b, workers=3 * b, hedge_after=CARRY_AFTER,
                             carry_staleness=1),
            "none_s2": dict(max_staleness=2, overprovision=0, workers=3 * b),
            "over_s2": dict(max_staleness=2, overprovision=b, workers=4 * b),
            "hedge_s2": dict(max_staleness=2, overprovision=b, workers=4 * b, hedge_after=HEDGE_AFTER),
            "carry_s2": dict(max_staleness=2, overprovision=b, workers=4 * b, hedge_after=CARRY_AFTER,
                             carry_staleness=1)}


def tail_section(size: dict, only: list[str] | None = None, verify_steps: float = VERIFY_STEPS) -> dict:
    b, g = TAIL["groups_per_step"], TAIL["group_size"]
    TAIL["train_step_s_calibrated"] = train_step_s(TAIL["obs_tokens"], b, g)
    TAIL["verify_steps"] = verify_steps
    TAIL["median_s"] = round(verify_steps * TAIL["train_step_s_calibrated"], 4)
    print(f"  trainer step {TAIL['train_step_s_calibrated']:.3f} s: verifier median {TAIL['median_s']} s")
    runs = {}
    for name, kw in tail_configs(b).items():
        if only and name not in only:
            continue
        cfg = RolloutConfig(steps=size["tail_steps"], groups_per_step=b, group_size=g,
                            filter_zero_variance=False, groups_per_wave=kw.pop("groups_per_wave", 1), **kw)
        load = os.getloadavg()[0]   # other jobs on the machine show here (and in the step times)
        runs[name] = measured_run(cfg, TAIL["median_s"], TAIL["sigma"], obs_tokens=TAIL["obs_tokens"])
        runs[name]["load_avg_1m"] = [load, os.getloadavg()[0]]
        print(f"  measured {name}: {runs[name]['throughput']:.2f} groups/s, "
              f"idle {runs[name]['trainer_idle_frac']:.3f}", flush=True)
    return runs


def tail_summary(runs: dict) -> dict:
    """The headline keys from HEADLINE (chosen before measuring), and each over-provisioned
    run's gain against none at the same staleness bound."""
    out = {}
    for name, r in runs.items():
        base = runs.get("none_" + name.split("_")[-1])
        if base is not None and name != base and not name.startswith("none"):
            out[f"gain_{name}"] = r["throughput"] / base["throughput"] - 1
    if HEADLINE in runs:
        h = runs[HEADLINE]
        out["overprovision_gain"] = out.get(f"gain_{HEADLINE}", float("nan"))
        out["trainer_idle_frac"] = h["trainer_idle_frac"]
        out["wasted_token_frac"] = h["wasted_token_frac"]
        out["headline_run"] = HEADLINE
    return out


def predict(costs: dict, name: str, steps: int, train_s: float | None = None) -> dict:
    b, g = TAIL["groups_per_step"], TAIL["group_size"]
    kw = dict(tail_configs(b)[name])
    kw.pop("groups_per_wave", None)
    c = Costs(gen_s=costs["gen_s"], verify_s=costs["verify_s"], train_s=train_s or costs["train_s"])
    return simulate(c, SimConfig(steps=steps, groups_per_step=b, group_size=g,
                                 shared_cpu=costs["shared_cpu"], **kw),
                    repeats=5).as_dict()


def sim_section(runs: dict, steps: int, fit_on: str = "none_s1") -> dict:
    """Fit on one measured run; predict every other configuration's idle share and throughput.
    `own_step_err`: the same prediction given the predicted run's own measured trainer step,
    which separates the model's error from the step time's drift between runs (the load)."""
    costs = runs[fit_on]["costs"]
    out, errors, own = {}, [], []
    for name, measured in runs.items():
        if name == fit_on:
            continue
        p = predict(costs, name, steps)
        thr_err = abs(p["throughput"] / measured["throughput"] - 1)
        idle_err = abs(p["trainer_idle_frac"] - measured["trainer_idle_frac"])
        q = predict(costs, name, steps, train_s=measured["train_s"])
        own_err = max(abs(q["throughput"] / measured["throughput"] - 1),
                      abs(q["trainer_idle_frac"] - measured["trainer_idle_frac"]))
        out[name] = {"predicted": p, "throughput_rel_err": thr_err, "idle_abs_err": idle_err,
                     "own_step_err": own_err, "train_s_ratio": measured["train_s"] / costs["train_s"]}
        errors.append((thr_err, idle_err))
        own.append(own_err)
    return {"fit_on": fit_on, "predictions": out, "sim_error": max(max(e) for e in errors),
            "sim_throughput_err": max(e[0] for e in errors), "sim_idle_err": max(e[1] for e in errors),
            "sim_error_own_step": max(own)}


def table(rows: list[tuple]) -> None:
    for k, v in rows:
        print(f"  {k:<34} {v:>12.4f}" if isinstance(v, float) else f"  {k:<34} {v!s:>12}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap, "200 share steps, 3 curriculum seeds, 5,000 picks, 25 tail steps")
    ap.add_argument("--only", choices=["shares", "curriculum", "picks", "tail"], default=None)
    ap.add_argument("--runs", nargs="*", help="only these long-tail runs (default: all)")
    ap.add_argument("--verify-steps", type=float, default=VERIFY_STEPS,
                    help="the verifier's median in trainer steps (a sensitivity check; "
                         "the default is the headline's)")
    args = ap.parse_args()
    size = SIZES["quick" if args.quick else "full"]
    torch.set_num_threads(1)
    out: dict = {"size": "quick" if args.quick else "full", "tail_workload": TAIL,
                 "note": "shared machine: other engineers' jobs were running"}
    t0 = time.time()
    if args.only in (None, "shares"):
        out |= shares_section(size)
    if args.only in (None, "curriculum"):
        out |= curriculum_section(size)
    if args.only in (None, "picks"):
        out |= picks_section(size)
    if args.only in (None, "tail"):
        runs = tail_section(size, args.runs, args.verify_steps)
        out |= tail_summary(runs)
        out["tail_runs"] = runs
        if len(runs) > 1:
            out |= sim_section(runs, size["tail_steps"])
            fits = {fit: sim_section(runs, size["tail_steps"], fit) for fit in runs}
            out["sim_error_by_fit_run"] = {fit: f["sim_error"] for fit, f in fits.items()}
            out["sim_error_own_step_by_fit_run"] = {fit: f["sim_error_own_step"] for fit, f in fits.items()}
            out["sim_error_all_fits"] = max(out["sim_error_by_fit_run"].values())
    out["bench_wall_s"] = time.time() - t0
    table([(k, v) for k, v in out.items() if isinstance(v, (int, float, bool))])
    if args.json:
        for r in out.get("tail_runs", {}).values():  # quantiles, not the raw samples
            r["costs"]["verify_s"] = {d: quantiles(v) for d, v in r["costs"]["verify_s"].items()}
    write_json(args.json, out)


def quantiles(xs: list[float]) -> dict:
    xs = sorted(xs)
    at = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))]  # noqa: E731
    return {"n": len(xs), "p10": at(0.1), "p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": xs[-1]}


if __name__ == "__main__":
    main()
