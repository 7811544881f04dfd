#!/usr/bin/env bash
# CI: the cad suite's generation extra (manifold3d, trimesh); idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python -m pip install -q -c constraints.txt -e '.[cad]'
