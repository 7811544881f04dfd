"""bench/gpu_check.py (scripts/gpu_check.sh) in its dry mode: the GPU check's code on the CPU at a
tiny size, every part through the same paths it takes on CUDA, one JSON line out."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import gpu_check  # noqa: E402

from posttrain.errors import ConfigError  # noqa: E402


@pytest.mark.slow  # ~10 s alone, over a minute on 2 shared cores (the quickstart's sandboxes)
def test_the_dry_run_prints_one_line_with_every_figure(tmp_path, capsys):
    out = gpu_check.main(["--device", "cpu", "--tiny", "--tokens", "8", "--rl-steps", "2",
                          "--runs", str(tmp_path), "--json", str(tmp_path / "check.json")])
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(line) == out == json.loads((tmp_path / "check.json").read_text())
    assert out["gpu"] is None and out["device"]["device"] == "cpu"
    for part in ("quickstart", "engine", "rl"):
        assert "error" not in out[part], out[part]
    assert out["quickstart"]["device"] == out["rl"]["device"] == "cpu"
    engine = out["engine"]
    assert engine["tok_s_batch1"] > 0 and engine["tok_s_batch64"] > 0
    assert 0 <= engine["mean_abs_dlogp"] <= engine["max_abs_dlogp"] < 0.5  # bf16 or fp32 engine vs fp32 trainer
    assert out["rl"]["steps"] == 2 and out["rl"]["steps_per_s"] > 0


def test_a_failing_part_is_recorded_and_the_others_run(tmp_path):
    out = gpu_check.main(["--device", "cpu", "--model", str(tmp_path / "missing"), "--skip", "quickstart",
                          "--skip", "engine", "--rl-steps", "1", "--runs", str(tmp_path)])
    assert set(out["rl"]) == {"error", "part_wall_s"}


def test_cuda_without_a_gpu_stops_at_once():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ConfigError, match="torch sees no CUDA GPU"):
        gpu_check.main(["--device", "cuda"])


def test_the_script_runs_the_check():
    r = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--help"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "--tiny" in r.stdout
