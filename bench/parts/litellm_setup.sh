#!/usr/bin/env bash
# Benchmark only: LiteLLM's proxy in its own venv (.venv-litellm, gitignored), the baseline
# bench/gateway.py compares against. Idempotent; never a dependency of posttrain itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=.venv-litellm
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import litellm.proxy.proxy_server" 2>/dev/null; then
  "$VENV/bin/python" -m pip install -q "litellm[proxy]==1.80.0"
fi
echo "$VENV/bin/litellm"
