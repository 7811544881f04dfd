"""20 random kill-and-resume cycles of the driver (SIGKILL of the process running `run_rl` on the
Ray executor, joined to one Ray cluster) in synchronous mode give exactly the metrics of an
uninterrupted run, and the ledger of the final checkpoint shows nothing lost or trained twice.

Each driver is a fresh process forked from a forkserver that has imported torch, Ray and
posttrain once, so a cycle costs the Ray connection and the actors' start, not the imports."""

import json
import multiprocessing
import os
import random
import signal
import statistics
import time

import pytest
from tests_ray import optional_ray  # noqa: E402

ray = optional_ray()   # None without the extra: then deselected (tests/needs.py)

from posttrain.recipes.rl.run import run_rl  # noqa: E402
from posttrain.recipes.rl.config import load_rl_config  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.needs("ray")]
CYCLES = int(os.environ.get("POSTTRAIN_DRIVER_KILLS", "20"))  # fewer for a quick look on a busy machine
STEPS = 40
SETTINGS = ["threads=1", 'tasks.kind="copy"', "tasks.n_train=6", "tasks.n_eval=0", "tasks.max_tokens=4",
            "policy.sft_steps=0", "policy.vocab_size=300", f"rollout.steps={STEPS}", "rollout.max_staleness=0",
            "rollout.groups_per_step=2", "rollout.group_size=3", "rollout.checkpoint_every=1",
            'cluster.executor="ray"', "cluster.sandbox_actors=1", "cluster.engine_replicas=1",
            "cluster.start_timeout_s=120"]


@pytest.fixture(scope="module")
def address():
    ray.init(num_cpus=2, object_store_memory=100 * 2**20, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def drivers():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "ray", "transformers.models.llama.modeling_llama", "posttrain.recipes.rl.run",
                                "posttrain.rollout.executors.ray_executor"])
    return ctx


def metrics(run_dir):
    return [{k: v for k, v in json.loads(line).items()
             if not (k.endswith("_s") or "idle" in k or "busy" in k or k.startswith("actor_"))}
            for line in (run_dir / "metrics.jsonl").open()]


def step_period_s(run_dir) -> float:
    """The median time from one metrics line to the next (a step and its checkpoint) of a finished run."""
    elapsed = [json.loads(line)["elapsed_s"] for line in (run_dir / "metrics.jsonl").open()]
    return statistics.median(b - a for a, b in zip(elapsed, elapsed[1:]))


def lines(path) -> int:
    return len(path.read_text().splitlines()) if path.is_file() else 0


def test_twenty_driver_kills_then_resume_give_the_uninterrupted_metrics(tmp_path, address, drivers):
    base = [f'runs_dir="{tmp_path}"', *SETTINGS, f'cluster.address="{address}"']
    run_rl(load_rl_config(None, base + ['name="whole"']))
    period = step_period_s(tmp_path / "whole")  # kills land within one step of a line on any CPU
    rng, run = random.Random(0), tmp_path / "killed"
    cfg = load_rl_config(None, base + ['name="killed"'])
    progress = []
    for cycle in range(CYCLES):
        start = lines(run / "metrics.jsonl")
        resume = (run / "checkpoints" / "latest").is_file()  # a kill may come before the first one
        proc = drivers.Process(target=run_rl, args=(cfg,), kwargs=dict(resume=resume, overwrite=not resume))
        proc.start()
        deadline = time.time() + 300
        while time.time() < deadline and proc.is_alive() and lines(run / "metrics.jsonl") <= start:
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.8) * period)  # mid-step, mid-checkpoint or between; < 2 steps a cycle
        assert proc.is_alive(), f"cycle {cycle}: the run ended first (exit code {proc.exitcode})"
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        progress.append(lines(run / "metrics.jsonl"))
    assert progress[-1] < STEPS, "every cycle must kill a run that had steps left"
    run_rl(cfg, resume=True)
    assert metrics(run) == metrics(tmp_path / "whole")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["audit"]["lost"] == []
    assert summary["audit"]["trained"] == sum(r["groups"] for r in metrics(run))
    log = [json.loads(line) for line in (run / "events.jsonl").open()]
    trained = [u for e in log if e["event"] == "train" for u in e["uids"]]
    assert len(trained) == len(set(trained)) == summary["audit"]["trained"]
