"""The multi-domain preset examples/rl_mixture.toml, short (slow: real sandboxes, SFT, four
generated suites): every step holds each suite's exact share of the batch, and each suite's
tasks and per-domain metrics are there."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

DOMAINS = {"basics": 2.0, "tools": 1.0, "finance": 1.0, "longctx": 1.0}   # shares x 5 groups


def test_mixture_preset_trains_on_four_suites_in_exact_shares(tmp_path):
    args = [sys.executable, "-m", "posttrain.cli", "rl", "examples/rl_mixture.toml",
            "--set", f'runs_dir="{tmp_path}"', "--set", "threads=1", "--set", "rollout.steps=2",
            "--set", "tasks.n_eval=0", "--set", "policy.sft_steps=20",
            "--set", "rollout.filter_zero_variance=false"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    run = tmp_path / "rl-mixture"
    for name in DOMAINS:
        assert len(list((run / "tasks" / name).glob("*/task.toml"))) >= 12, name
    finance = next((run / "tasks" / "finance").glob("*/task.toml")).read_text()
    assert 'domain = "finance"' in finance and 'family = "lookup"' in finance
    rows = [json.loads(x) for x in (run / "metrics.jsonl").open()]
    assert [row["step"] for row in rows] == [0, 1]
    for row in rows:
        assert {d: row[f"d/{d}/groups"] for d in DOMAINS} == DOMAINS
