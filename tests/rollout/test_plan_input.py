"""`posttrain plan` refuses out-of-range knobs and a directory as --json in one line, before
reading the run (so no run is needed here)."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize("args, message", [
    (["--train-scaling", "-1"], "must be in (0, 1]"),
    (["--train-scaling", "0"], "must be in (0, 1]"),
    (["--train-scaling", "5"], "must be in (0, 1]"),
    (["--sandbox-slots", "0"], "must be greater than 0"),
    (["--json", "."], "is a directory; a file path is expected"),
])
def test_plan_bad_input_is_one_line(tmp_path, args, message):
    r = subprocess.run([sys.executable, "-m", "posttrain.cli", "plan", str(tmp_path), *args],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
