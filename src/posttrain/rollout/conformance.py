"""The conformance gate: the engine's logprobs on a fixed probe set against the trainer's
forward on the same tokens, at start (a run refuses to start above the thresholds) and after
every Nth weight update (logged per version to RUN/conformance.jsonl).

With samples x ~ π_engine and log ρ = log π_train(x) − log π_engine(x), k3 = E[ρ − log ρ − 1]
estimates KL(π_engine ‖ π_train) (Schulman's k3; ms-swift logs it as `k3_kl`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from posttrain.devices import module_device
from posttrain.engine.base import SamplingParams
from posttrain.errors import PosttrainError
from posttrain.rollout.weights import LockedEngine
from posttrain.train.logprobs import token_logprobs

# The gate's default (max, mean) |Δlogp| per engine dtype against the trainer's fp32 forward.
# fp32: the same kernels' rounding. bf16: SmolLM2-135M-Instruct's bf16 engine measured max
# 0.20-0.35 and mean 0.036-0.042 on the probes (docs/engine-serving.md "Conformance gate"), so the
# limits leave it room; a failed update or another model's weights still exceed them.
GATE_LIMITS = {"float32": (0.05, 0.005), "bfloat16": (1.0, 0.1)}


def gate_limits(cfg, engine_dtype: str) -> tuple[float, float]:
    """(max, mean) |Δlogp| the gate allows an engine running `engine_dtype`: the set
    engines.max_abs_logp / mean_abs_logp, else that dtype's defaults."""
    max_abs, mean_abs = GATE_LIMITS[engine_dtype]
    return (max_abs if cfg.max_abs_logp is None else cfg.max_abs_logp,
            mean_abs if cfg.mean_abs_logp is None else cfg.mean_abs_logp)


PROBE_TEXTS = [
    "The quick brown fox jumps over the lazy dog. Then the dog",
    "def add(a, b):\n    return",
    "List the files in /app and count the lines of every .txt file:",
    "Question: what is 17 * 23? Answer:",
    "Once upon a time, in a small village by the sea,",
    "import json\nwith open('data.json') as f:\n",
    "The three primary colours are",
    "ls -la /tmp && cat",
]


@dataclass
class Conformance:
    version: int
    max_abs: float
    mean_abs: float
    k3: float
    tokens: int
    engine_version: int


def probe_prompts(tokenizer, n: int) -> list[list[int]]:
    texts = (PROBE_TEXTS * (n // len(PROBE_TEXTS) + 1))[:n]
    return [tokenizer.encode(t, add_special_tokens=False) for t in texts]


def trainer_logprobs(model, prompts, completions, temperature: float) -> list[torch.Tensor]:
    """log π_train of each completion's sampled tokens, one padded forward on the model's device,
    returned on the host (beside the engine's)."""
    seqs = [p + c.token_ids for p, c in zip(prompts, completions)]
    width = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for b, s in enumerate(seqs):
        ids[b, :len(s)], mask[b, :len(s)] = torch.tensor(s), 1
    was_training = model.training
    model.eval()
    with torch.no_grad():
        device = module_device(model)
        lp = token_logprobs(model, ids.to(device), mask.to(device), temperature).cpu()
    model.train(was_training)
    return [lp[b, len(p):len(p) + len(c.token_ids)] for b, (p, c) in enumerate(zip(prompts, completions))]


def measure(engine, model, prompts, temperature: float, max_tokens: int, version: int) -> tuple:
    """(Conformance, completions, trainer logprobs) for one probe pass."""
    params = SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=12_345)
    comps = engine.generate(prompts, params)
    mine = trainer_logprobs(model, prompts, comps, temperature)
    theirs = [torch.tensor(c.logprobs) for c in comps]
    delta = torch.cat([m - t for m, t in zip(mine, theirs)]).double()  # log ρ
    k3 = (delta.exp() - delta - 1).mean()
    report = Conformance(version, float(delta.abs().max()), float(delta.abs().mean()), float(k3),
                         int(delta.numel()), min(c.policy_version for c in comps))
    return report, comps, mine


def diagnose(report: Conformance, model, prompts, comps, temperature: float, engine_dtype: str) -> str:
    """What most likely differs, from the pattern of the gap."""
    if report.engine_version != report.version:
        return f"stale weights: the engine sampled with version {report.engine_version}, the trainer holds {report.version}"
    if temperature != 1.0:
        raw = trainer_logprobs(model, prompts, comps, 1.0)
        gap_raw = float(torch.cat([r - torch.tensor(c.logprobs) for r, c in zip(raw, comps)]).abs().mean())
        if gap_raw < report.mean_abs / 4:
            return ("sampling params: the engine reports logprobs before temperature (raw); "
                    "start vLLM with --logprobs-mode processed_logprobs")
    trainer_dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    if engine_dtype != trainer_dtype and report.mean_abs <= GATE_LIMITS[engine_dtype][1]:
        return (f"dtype: the engine runs {engine_dtype}, the trainer {trainer_dtype} (a gap of that size "
                "is rounding: raise engines.max_abs_logp / mean_abs_logp)")
    if report.mean_abs > 0.05:
        return "weights: the engine serves other weights (a different model, or a failed update)"
    return "kernels: same weights and dtype, but the engine's kernels round differently"


class GatedEngine(LockedEngine):
    """A LockedEngine whose publish is followed by a conformance check every `every` versions."""

    def __init__(self, engine, tokenizer, run_dir: Path, cfg, temperature: float, side_by_side: bool = False):
        super().__init__(engine, side_by_side)
        self.cfg, self.temperature = cfg, temperature
        self.prompts = probe_prompts(tokenizer, cfg.probes)
        self.log_path = Path(run_dir) / "conformance.jsonl"
        self.last: Conformance | None = None
        self._updates = 0

    def check(self, model, version: int, at_start: bool = False) -> Conformance:
        report, comps, _ = measure(self, model, self.prompts, self.temperature, self.cfg.probe_tokens, version)
        self.last = report
        dtype = self.cfg.compute_dtype.name
        max_abs, mean_abs = gate_limits(self.cfg, dtype)
        over = report.max_abs > max_abs or report.mean_abs > mean_abs or report.engine_version != version
        why = diagnose(report, model, self.prompts, comps, self.temperature, dtype) if over else ""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(asdict(report) | {"at_start": at_start, "over": over, "why": why}) + "\n")
        if over and at_start:
            raise PosttrainError(
                f"engine/trainer logprob mismatch at start: max |Δlogp| {report.max_abs:.4g} "
                f"(limit {max_abs}), mean {report.mean_abs:.4g} (limit {mean_abs}, {dtype} engine), k3 {report.k3:.3g} over {report.tokens} tokens; "
                f"likely cause: {why}")
        return report

    def start(self, model, version: int = 0) -> Conformance:
        """Push the trainer's weights, then refuse to go on unless the engine agrees."""
        super().publish(model, version)
        return self.check(model, version, at_start=True)

    def publish(self, model, version: int) -> None:
        super().publish(model, version)
        self._updates += 1
        every = self.cfg.check_interval
        if every and self._updates % every == 0:
            self.check(model, version)
