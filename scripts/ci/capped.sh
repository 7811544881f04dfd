#!/usr/bin/env bash
# Run a command under a wall-clock cap and say what it took; .ci/run runs each suite so.
#   bash scripts/ci/capped.sh NAME CAP_S COMMAND...
# A command past its cap is stopped and this exits 124, a failure: a suite cut off by its
# cap has not run what it claims. Any other exit status is passed on.
set -uo pipefail
name=$1 cap=$2
shift 2
start=$SECONDS
timeout --kill-after=30 "$cap" "$@"
rc=$?
echo "ci: $name took $((SECONDS - start)) s of its $cap s cap (exit $rc)"
if [ "$rc" -eq 124 ]; then
  echo "ci: $name hit its $cap s cap: FAILED (make the suite shorter or raise its cap in .ci/run)"
fi
exit "$rc"
