"""`rollout.episode_checkpoints`: a synchronous multi-turn run SIGKILLed mid-wave resumes its
in-flight episodes at their last turn (files restored), and ends exactly as an uninterrupted run."""

import json
import math
import os
import signal
import subprocess
import sys
import time

from posttrain.recipes.rl.run import run_rl
from posttrain.recipes.rl.config import load_rl_config

SETTINGS = ["threads=1", "tasks.n_train=4", "tasks.n_eval=0", "policy.sft_steps=2", "rollout.steps=2",
            "rollout.max_staleness=0", "rollout.groups_per_step=1", "rollout.group_size=2",
            "rollout.checkpoint_every=1", "rollout.overprovision=1", "rollout.filter_zero_variance=false",
            "rollout.record_batches=true", "rollout.episode_checkpoints=true",
            "agent.max_turns=5", "agent.max_reply_tokens=8"]


def _metrics(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    return [{k: v for k, v in r.items() if not (k.endswith("_s") or "idle" in k or "busy" in k
                                                or k.startswith("trajectories_per"))} for r in rows]


def _same(rows, expected) -> bool:
    """Equal metrics; the engine's logprobs of a resumed episode may differ by float rounding
    (it shares its batch with other rows than before), so floats agree to 1e-5."""
    return len(rows) == len(expected) and all(
        r.keys() == e.keys() and all(math.isclose(r[k], e[k], abs_tol=1e-5) if isinstance(e[k], float)
                                     else r[k] == e[k] for k in e) for r, e in zip(rows, expected))


def _mid_wave(run_dir) -> bool:
    """Step 0 is checkpointed and an episode of step 1 has a checkpoint past its second turn."""
    metrics, stored = run_dir / "metrics.jsonl", run_dir / "episodes"
    if not metrics.is_file() or len(metrics.read_text().splitlines()) < 1 or not stored.is_dir():
        return False
    for state in stored.glob("*/state.json"):
        try:
            if json.loads(state.read_text())["turn"] >= 2:
                return True
        except (OSError, ValueError):
            pass
    return False


def _first_model_call(batch_dir) -> float:
    """The earliest model Step of the last trained batch's episodes (seconds since the epoch)."""
    last = sorted(batch_dir.iterdir())[-1]
    data = json.loads(last.read_text())
    return min(s["start_s"] for g in data["groups"] for e in g["episodes"] for s in e["steps"] if s["kind"] == "model")


def test_sigkill_mid_wave_resumes_the_episodes_and_matches_an_uninterrupted_run(tmp_path):
    base = [f'runs_dir="{tmp_path}"', *SETTINGS]
    run_rl(load_rl_config(None, base + ['name="whole"']))
    assert not (tmp_path / "whole" / "episodes").exists()          # reclaimed with the run
    cmd = [sys.executable, "-m", "posttrain.cli", "rl", *sum((["--set", s] for s in base), []),
           "--set", 'name="killed"']
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not _mid_wave(tmp_path / "killed"):
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed mid-wave"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    resumed_at = time.time()
    run_rl(load_rl_config(None, base + ['name="killed"']), resume=True)
    assert _same(_metrics(tmp_path / "killed"), _metrics(tmp_path / "whole"))
    assert _first_model_call(tmp_path / "killed" / "batches") < resumed_at   # turns kept, not redone
    assert not (tmp_path / "killed" / "episodes").exists()
