#!/usr/bin/env bash
# Upgrade the pinned dependencies: resolve the newest versions that posttrain's ranges allow in
# a fresh venv with every extra (torch stays at 2.13.0, the CPU build), run the default test suite there, and only
# if it passes rewrite constraints.txt from what was installed. Review with `git diff constraints.txt`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
venv=$(mktemp -d)/venv
trap 'rm -rf "$(dirname "$venv")"' EXIT
"$PY" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
"$venv/bin/python" -m pip install -q torch==2.13.0
extras=$("$PY" -c 'import tomllib; print(",".join(tomllib.load(open("pyproject.toml", "rb"))["project"].get("optional-dependencies", {})))')
"$venv/bin/python" -m pip install -q -e ".[$extras]"
"$venv/bin/python" -m pytest -q -x
{
  sed -n '/^# /p;/^torch==/p' constraints.txt
  "$venv/bin/python" -m pip freeze --all --exclude-editable | grep -v -e '^-e' -e '^torch==' -e '^pip==' | sort -f
} > constraints.txt.new
mv constraints.txt.new constraints.txt
echo "constraints.txt rewritten; review with: git diff constraints.txt"
