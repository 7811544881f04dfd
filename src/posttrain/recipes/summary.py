"""RUN/summary.json of `posttrain rl` and `posttrain quickstart`: one typed record, written by
both recipes and read back by whoever compares runs (bench/). The file stays one flat JSON
object, so a reader of its keys (`paired_diff`, `eval_after`, ...) finds them where they were."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

# The paired held-out differences (evals/stats.py paired_gain, recipes/rl/heldout.py heldout_gain)
GAIN_PREFIXES = ("paired_", "heldout_")


@dataclasses.dataclass
class RunSummary:
    wall_s: float
    cpu: dict                                  # machine.cpu_info()
    seed: int | None = None                    # (None: a preempted rl run's, which goes on)
    eval_before: dict | None = None            # held-out score before training (None: not reached)
    eval_after: dict | None = None
    gain: dict[str, float] = dataclasses.field(default_factory=dict)  # after - before, paired by task
    engine: dict | None = None                 # the rollout engine's dtype (quickstart: and kernels)
    kernel_plan: dict | None = None            # kernels/plan.py: the plan the engine ran
    recipe: dict = dataclasses.field(default_factory=dict)  # the recipe's own: rl's steps, audit, ...

    @classmethod
    def of(cls, flat: dict) -> RunSummary:
        """The summary of summary.json's flat keys: the typed ones, the gain's, the recipe's rest."""
        typed = {f.name for f in dataclasses.fields(cls)} - {"gain", "recipe"}
        gain = {k: v for k, v in flat.items() if k.startswith(GAIN_PREFIXES)}
        rest = {k: v for k, v in flat.items() if k not in typed and k not in gain}
        return cls(**{k: v for k, v in flat.items() if k in typed}, gain=gain, recipe=rest)

    def as_dict(self) -> dict:
        """summary.json's flat object; fields a run did not reach (None) are left out."""
        head = {"eval_before": self.eval_before, "eval_after": self.eval_after}
        tail = {"engine": self.engine, "kernel_plan": self.kernel_plan, "seed": self.seed,
                "wall_s": self.wall_s, "cpu": self.cpu}
        flat = head | self.gain | self.recipe | tail
        return {k: v for k, v in flat.items() if v is not None or k in self.recipe}

    def write(self, run_dir: Path) -> Path:
        path = run_dir / "summary.json"
        path.write_text(json.dumps(self.as_dict(), indent=2))
        return path

    @classmethod
    def read(cls, run_dir: Path) -> RunSummary:
        return cls.of(json.loads((run_dir / "summary.json").read_text(encoding="utf-8")))
