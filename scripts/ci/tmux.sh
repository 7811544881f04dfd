#!/usr/bin/env bash
# CI: tmux from the Debian package, for the terminal test of `posttrain eval --approve`
# (tests/evals/test_eval_approve.py runs the CLI in a tmux session and answers with send-keys).
# Idempotent: installs only when tmux is missing.
set -euo pipefail
if ! command -v tmux >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends tmux >/dev/null
fi
tmux -V
