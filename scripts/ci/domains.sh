#!/usr/bin/env bash
# CI: the domain suites' extras: cad's generation (manifold3d, trimesh), instruct's checker
# (if-verifiable) and reasoning-gym's datasets and scorers; idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python -m pip install -q -c constraints.txt -e '.[cad,instruct,reasoning-gym]'
# The experiment trackers' extras (W&B, MLflow, trackio) for tests/train/tracking.
.venv/bin/python -m pip install -q -c constraints.txt -e '.[tracking]'
