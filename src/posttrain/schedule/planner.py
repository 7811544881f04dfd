"""`posttrain plan`: costs measured in a run, fed to the simulator, to recommend the
rollout:train split, staleness bound and over-provisioning for a described cluster.

Costs come from a run directory: config.json (B, G), metrics.jsonl (train step time,
trainer idle and engine busy shares) and events.jsonl (each finished group's generation
seconds and its episodes' verify seconds, by domain). Where the run's engine shared cores
with its trainer (`shared_cores`), that contention is divided out, so a cluster whose engines
and trainer ranks are separate devices is predicted without it; an engine on cores of its own
(a pinned process, vLLM servers) is taken as measured. Training is assumed to scale linearly
with trainer ranks and generation with engines; say otherwise with the scale factors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from posttrain.errors import PosttrainError
from posttrain.schedule.simulate import Costs, SimConfig, simulate


def decontend(gen_s: float, train_s: float, trainer_idle: float, engine_busy: float) -> tuple[float, float]:
    """(generation, train step) seconds without the slow-down the run ran under:
    the trainer by (1 + engine busy share), the engine by (1 + trainer busy share)."""
    return gen_s / (2.0 - trainer_idle), train_s / (1.0 + engine_busy)


def shared_cores(config: dict) -> bool:
    """Whether the run's engine computed on the trainer's cores (recipes/rl/engines.py): the
    embedded engine always; the process engine unless pinned (engines.pin_cores, None: pinned
    for single-turn copy tasks only); vLLM servers never. A config without [engines]: embedded."""
    engines = config.get("engines", {})
    kind = engines.get("kind", "embedded")
    if kind == "process":
        pin = engines.get("pin_cores")
        return not (pin if pin is not None else config.get("tasks", {}).get("kind") == "copy")
    return kind == "embedded"


def _jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise PosttrainError(f"{path}: missing (is this a `posttrain rl` run directory?)")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def fit_costs(run_dir: str | Path) -> tuple[Costs, dict]:
    """(costs, the run's rollout config) from a finished run directory."""
    run = Path(run_dir)
    rows = [r for r in _jsonl(run / "metrics.jsonl") if r.get("phase") == "rl"][1:]
    finish = [e for e in _jsonl(run / "events.jsonl") if e["event"] == "finish" and "verify_s" in e]
    if not rows or not finish:
        raise PosttrainError(f"{run}: needs at least 2 steps and finished groups with timings")
    config = json.loads((run / "config.json").read_text())
    rollout = config["rollout"]
    wall = sum(r["step_wall_s"] for r in rows)
    idle = sum(r["trainer_idle_frac"] * r["step_wall_s"] for r in rows) / wall
    busy = sum(r.get("engine_busy_frac", 0.0) * r["step_wall_s"] for r in rows) / wall
    train_s = sum(r["step_wall_s"] * (1 - r["trainer_idle_frac"]) for r in rows) / len(rows)
    gen = [e["gen_s"] for e in finish]
    verify: dict[str, list[float]] = {}
    for e in finish:
        verify.setdefault(e.get("domain", "default"), []).extend(e["verify_s"])
    gen_alone, train_alone = sum(gen) / len(gen), train_s
    if shared_cores(config):
        gen_alone, train_alone = decontend(gen_alone, train_alone, idle, busy)
    passes = [r >= 1.0 for e in finish for r in e["rewards"]]
    costs = Costs(gen_s=[g * gen_alone / max(1e-9, sum(gen) / len(gen)) for g in gen], verify_s=verify,
                  train_s=train_alone, pass_rate=sum(passes) / len(passes))
    return costs, rollout


@dataclass(frozen=True)
class Cluster:
    devices: int                      # accelerators to split between engines and trainer ranks
    sandbox_slots: int | None = None  # episodes that can verify at once
    train_scale_per_rank: float = 1.0  # speed-up of one more trainer rank (1 = linear)
    gen_scale_per_engine: float = 1.0


HEDGE_AFTER = 1.5   # hedged candidates: over-provisioned groups only for stragglers
# partial-rollout candidates: hedges sooner, the stragglers trained a version later (carry 1)
CARRY = (0.75, 1)


def candidates(cluster: Cluster, b: int, g: int):
    for engines in range(1, cluster.devices):
        ranks = cluster.devices - engines
        for staleness in (0, 1, 2):
            for over in sorted({0, b // 2, b}):
                if staleness == 0 and over:
                    continue
                workers = (staleness + 1) * b + over
                if cluster.sandbox_slots:
                    workers = min(workers, max(1, cluster.sandbox_slots // g))
                hedges = ((0.0, 0), (HEDGE_AFTER, 0), CARRY) if over and staleness else ((0.0, 0),)
                for hedge, carry in hedges:
                    yield engines, ranks, staleness, over, workers, hedge, carry


def recommend(costs: Costs, rollout: dict, cluster: Cluster, steps: int = 40, shares=None) -> list[dict]:
    """Every candidate's predicted throughput and trainer idle share, best first (ties go
    to the smaller staleness bound, then no carry, then less over-provisioning)."""
    b, g = rollout["groups_per_step"], rollout["group_size"]
    shares = shares or {d: 1.0 / len(costs.verify_s) for d in costs.verify_s}
    out = []
    for engines, ranks, staleness, over, workers, hedge, carry in candidates(cluster, b, g):
        cfg = SimConfig(steps=steps, groups_per_step=b, group_size=g, max_staleness=staleness,
                        overprovision=over, workers=workers, engines=engines, hedge_after=hedge,
                        carry_staleness=carry,
                        sandbox_slots=cluster.sandbox_slots, shares=shares,
                        train_scale=1 + (ranks - 1) * cluster.train_scale_per_rank,
                        gen_scale=cluster.gen_scale_per_engine)
        r = simulate(costs, cfg, repeats=2)
        out.append({"engines": engines, "trainer_ranks": ranks, "max_staleness": staleness,
                    "overprovision": over, "hedge_after": hedge, "carry_staleness": carry,
                    "workers": workers,
                    "groups_per_s": r.throughput,
                    "trainer_idle_frac": r.trainer_idle_frac, "wasted_frac": r.wasted_token_frac})
    return sorted(out, key=lambda x: (-round(x["groups_per_s"], 2), x["max_staleness"], x["carry_staleness"],
                                      x["overprovision"],
                                      round(x["wasted_frac"], 2)))
