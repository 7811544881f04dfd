"""`--device` on eval and serve: a bad name, or a GPU where torch sees none, fails in one line,
exit 2, before any model loads or job starts."""

import subprocess
import sys

import pytest
import torch


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "posttrain.cli", *args], capture_output=True, text=True,
                          timeout=120)


def _one_line_error(r, message):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().count("\n") == 0, r.stderr


@pytest.mark.parametrize("device, message", [("gpu", "device must be auto, cpu, cuda or cuda:N"),
                                             ("cuda", "torch sees no CUDA GPU")])
def test_a_device_that_cannot_be_had_is_one_line(tmp_path, device, message):
    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    _one_line_error(_cli("serve", "--model", str(tmp_path), "--port", "18431", "--device", device), message)
    _one_line_error(_cli("eval", "--tasks", str(tmp_path), "--model", str(tmp_path), "--jobs-dir",
                         str(tmp_path / "jobs"), "--device", device), message)
    assert not (tmp_path / "jobs").exists() or not any((tmp_path / "jobs").iterdir())
