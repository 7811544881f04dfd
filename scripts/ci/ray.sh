#!/usr/bin/env bash
# CI: install the Ray extra (ray==2.60.0, no other torch) into the venv setup.sh made.
# The Ray tests start their own local clusters (and stop them); nothing runs in the background.
# Idempotent: a second run only checks that ray imports.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python -c "import ray" 2>/dev/null || .venv/bin/python -m pip install -q -c constraints.txt -e '.[ray]'
.venv/bin/python -c "import ray, torch; print('ray', ray.__version__, 'torch', torch.__version__)"
