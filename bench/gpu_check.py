"""The GPU check (issue 55): on one GPU, in a few minutes, the quickstart at a reduced size, the
embedded engine's decode speed at batch 1 and 64 with its logprobs against the trainer's, and a
few steps of the SmolLM2 instruct recipe with engine and trainer on the GPU. Prints one JSON line.

    bash scripts/gpu_check.sh                                      # on a GPU host, SmolLM2 imported
    python bench/gpu_check.py --model DIR --json bench/results/gpu_check_h100.json
    python bench/gpu_check.py --device cpu --tiny                  # the dry mode CPU CI runs

--tiny puts a tiny random Llama and the copy task where SmolLM2 and the instruct suite stand:
the same code on every device, at a size a CPU runs in seconds (tests/bench/test_gpu_check.py).
A part that fails is recorded as its error and the others still run, so a short loan is not
spent twice. Never run on a GPU yet: no GPU was lent while this was built (docs/gpu.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from posttrain.devices import device_record, resolve_device
from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.config import EngineConfig
from posttrain.engine.paged.local import LocalEngine
from posttrain.train.batch import right_pad
from posttrain.train.logprobs import token_logprobs

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "smollm2_instruct.toml"
DEFAULT_MODEL = "~/.cache/posttrain/models/smollm2-135m-instruct"  # `posttrain models import`
TINY_QUICKSTART = ["n_train_tasks=4", "n_rl_tasks=4", "n_eval_tasks=2", "eval_samples=1", "sft.steps=2",
                   "sft.batch=4", "rl.steps=1", "rl.tasks_per_step=1", "rl.group_size=2"]
TINY_RL = ["tasks.kind=copy", "tasks.n_train=4", "tasks.n_eval=2", "policy.sft_steps=2",
           "rollout.max_staleness=0", "rollout.groups_per_step=2", "rollout.group_size=4"]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _part(out: dict, name: str, fn) -> None:
    """out[name] = fn()'s dict with its wall time, or the error it raised."""
    t0 = time.perf_counter()
    try:
        out[name] = fn()
    except Exception as e:  # recorded: the other parts still run on this loan
        out[name] = {"error": f"{type(e).__name__}: {e}"[:500]}
    out[name]["part_wall_s"] = round(time.perf_counter() - t0, 1)


def quickstart(device: str, runs: Path, tiny: bool) -> dict:
    """The quickstart's quick preset (smaller still with tiny) on the device."""
    from posttrain.recipes.quickstart.config import load_config
    from posttrain.recipes.quickstart.run import run_quickstart

    sets = [f"runs_dir={json.dumps(str(runs))}", 'name="quickstart"', f"device={json.dumps(device)}"]
    s = run_quickstart(load_config(None, "quick", sets + (TINY_QUICKSTART if tiny else [])))
    return {"device": s["device"]["device"], "pass_at_1_before": s["eval_before"]["pass_at_1"],
            "pass_at_1_after": s["eval_after"]["pass_at_1"], "paired_diff": s["paired_diff"], "wall_s": s["wall_s"]}


def _prompts(batch: int, vocab: int, length: int = 32) -> list[list[int]]:
    """Distinct prompts of token ids (no tokenizer: no stop token ends a reply early)."""
    return [[10 + (7 * i + 13 * j) % (vocab - 10) for j in range(length)] for i in range(batch)]


def _abs_dlogp(model, prompts, completions, device: torch.device) -> torch.Tensor:
    """|engine logprob - trainer logprob| of every sampled token; the trainer's fp32 forward."""
    out = []
    for s in range(0, len(prompts), 16):
        ps, cs = prompts[s:s + 16], completions[s:s + 16]
        ids, mask = right_pad([p + c.token_ids for p, c in zip(ps, cs)])
        with torch.no_grad():
            lp = token_logprobs(model, ids.to(device), mask.to(device)).cpu()
        for i, (p, c) in enumerate(zip(ps, cs)):
            out.append((lp[i, len(p):len(p) + len(c.token_ids)] - torch.tensor(c.logprobs)).abs())
    return torch.cat(out)


def engine_check(model, device: torch.device, tokens: int) -> dict:
    """Decode tokens/s at batch 1 and 64 (engine dtype auto: bf16 where the GPU has it) and
    max/mean |dlogp| of the batch-64 samples against the trainer's forward."""
    engine = LocalEngine(model, device=device, config=EngineConfig(dtype="auto", max_num_seqs=64))
    vocab = model.config.vocab_size
    engine.generate(_prompts(2, vocab), SamplingParams(max_tokens=4, seed=0))  # warm-up
    out = {"dtype": engine.dtype.name, "attention": engine.attention_backend[0], "gemm": engine.gemm}
    for batch in (1, 64):
        prompts = _prompts(batch, vocab)
        _sync(device)
        t0 = time.perf_counter()
        completions = engine.generate(prompts, SamplingParams(temperature=1.0, max_tokens=tokens, seed=batch))
        _sync(device)
        out[f"tok_s_batch{batch}"] = round(sum(len(c.token_ids) for c in completions) / (time.perf_counter() - t0), 1)
    d = _abs_dlogp(model, prompts, completions, device)
    return out | {"max_abs_dlogp": d.max().item(), "mean_abs_dlogp": d.mean().item()}


def rl_check(device: str, runs: Path, model_dir: str | None, steps: int, heldout: int, tiny: bool) -> dict:
    """A few steps of the SmolLM2 instruct recipe (tiny: the copy task) on the device, with its
    greedy held-out evals before and after (the recipe itself: 24 steps, 300 held-out prompts)."""
    from posttrain.recipes.rl.run import run_rl
    from posttrain.recipes.rl.config import load_rl_config

    sets = [f"runs_dir={json.dumps(str(runs))}", 'name="rl"', f"device={json.dumps(device)}",
            f"rollout.steps={steps}", "rollout.checkpoint_every=0"]
    if tiny:
        cfg = load_rl_config(None, sets + TINY_RL)
    else:
        sys.path.insert(0, str(ROOT / "bench"))
        from parts.instruct_tasks import make_tasks

        train, held = make_tasks(runs / "tasks", 512, heldout)
        cfg = load_rl_config(str(EXAMPLE), sets + [f"policy.init={json.dumps(model_dir)}",
                                                  f"tasks.path={json.dumps(str(train))}",
                                                  f"tasks.eval_path={json.dumps(str(held))}"])
    s = run_rl(cfg)
    rows = [r for r in map(json.loads, (cfg.run_dir / "metrics.jsonl").open()) if r.get("phase") == "rl"]
    return {"device": s["device"]["device"], "steps": s["steps"],
            "steps_per_s": round(len(rows) / rows[-1]["elapsed_s"], 4) if rows else None,
            "mismatch_max_abs": max((r.get("mismatch_max_abs", 0.0) for r in rows), default=None),
            "heldout_before": s["eval_before"], "heldout_after": s["eval_after"], "heldout_gain": s.get("paired_diff"),
            "heldout_ci": [s.get("paired_ci_low"), s.get("paired_ci_high")],
            "trainer_dtype": s["trainer"].get("compute_dtype"), "engine_dtype": s["engine"]["dtype"],
            "wall_s": s["wall_s"]}


def _policy(model_dir: str | None, tiny: bool, device: torch.device):
    if tiny:
        from posttrain.models.tiny import build_tiny_model

        return build_tiny_model(1024, seed=0).to(device)
    from posttrain.models.tiny import load_policy

    return load_policy(model_dir)[0].to(device)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda (the check) | cpu (a dry run) | auto | cuda:N")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="SmolLM2's HF directory (posttrain models import)")
    parser.add_argument("--tiny", action="store_true", help="a tiny random model and the copy task")
    parser.add_argument("--tokens", type=int, default=128, help="new tokens per reply in the engine check")
    parser.add_argument("--rl-steps", type=int, default=4, help="the recipe's own: 24")
    parser.add_argument("--heldout", type=int, default=32, help="held-out prompts (the recipe's own: 300)")
    parser.add_argument("--skip", action="append", default=[], choices=["quickstart", "engine", "rl"])
    parser.add_argument("--runs", type=Path, default=None, help="run directories (default: a temporary one)")
    parser.add_argument("--json", type=Path, default=None, help="also write the line here")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    model_dir = None if args.tiny else str(Path(args.model).expanduser())
    out = {"gpu": device_record(device)["gpu"], "device": device_record(device), "torch": torch.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        runs = args.runs or Path(tmp)
        if "quickstart" not in args.skip:
            _part(out, "quickstart", lambda: quickstart(str(device), runs / "qs", args.tiny))
        if "engine" not in args.skip:
            _part(out, "engine", lambda: engine_check(_policy(model_dir, args.tiny, device), device, args.tokens))
        if "rl" not in args.skip:
            _part(out, "rl", lambda: rl_check(str(device), runs / "rl", model_dir, args.rl_steps, args.heldout,
                                                     args.tiny))
    line = json.dumps(out)
    print(line, flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
