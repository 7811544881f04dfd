#!/usr/bin/env bash
# GPU smoke check, a few minutes on one GPU: embedded engine tokens/s on CUDA, one `posttrain rl`
# run (2 steps) sampling through vLLM with a weight update after each step, and the logprob
# agreement the conformance gate measured. Prints one JSON line. NEVER RUN YET: no GPU was lent.
#   VLLM_PYTHON=/path/to/gpu-vllm-env/bin/python bash scripts/gpu_smoke.sh
# Needs: .venv (scripts/setup.sh) with a CUDA torch, a vLLM GPU environment at $VLLM_PYTHON,
# and SmolLM2 imported (posttrain models import). The trainer itself runs on CPU (see docs/gpu.md).
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_PYTHON=${VLLM_PYTHON:?set VLLM_PYTHON to the python of a vLLM (GPU) environment}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
MODEL=$(.venv/bin/python -c "from posttrain.models.gguf import ensure_model; print(ensure_model())")
.venv/bin/python -m posttrain.cli rl examples/rl_vllm.toml --set "runs_dir=\"$OUT\"" \
  --set "policy.init=\"$MODEL\"" --set "engines.python=\"$VLLM_PYTHON\"" --set rollout.steps=2 \
  --set 'engines.extra_args=["--gpu-memory-utilization", "0.3"]' >"$OUT/rl.log" 2>&1 \
  || { tail -20 "$OUT/rl.log" >&2; exit 1; }
.venv/bin/python - "$OUT/rl-vllm" "$MODEL" <<'PY'
import json, sys, time
from pathlib import Path
import torch
from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import LocalEngine
from posttrain.models.tiny import load_policy

run, model_dir = Path(sys.argv[1]), sys.argv[2]
model, tok = load_policy(model_dir)
engine = LocalEngine(model.cuda(), tok, device="cuda")
prompt = tok.encode("Once upon a time, in a small village by the sea,", add_special_tokens=False)
params = SamplingParams(temperature=1.0, max_tokens=128, seed=0)
engine.generate([prompt] * 2, SamplingParams(max_tokens=4, seed=0))
t0 = time.perf_counter()
n = sum(len(c.token_ids) for c in engine.generate([prompt] * 32, params))
rows = [json.loads(x) for x in (run / "conformance.jsonl").open()]
print(json.dumps({"gpu": torch.cuda.get_device_name(0), "embedded_tok_s": n / (time.perf_counter() - t0),
                  "rl_steps": json.loads((run / "summary.json").read_text())["steps"],
                  "weight_updates": len(rows) - 1, "max_abs_logp": max(r["max_abs"] for r in rows),
                  "mean_abs_logp": max(r["mean_abs"] for r in rows)}))
PY
