"""`posttrain rl CONFIG.toml`: asynchronous RL on tasks, from a warm-started tiny model or an
HF checkpoint, with held-out evals before and after.

    posttrain rl examples/rl.toml            # runs/rl: metrics.jsonl, events.jsonl, checkpoints/
    posttrain rl examples/rl.toml --resume   # continue from checkpoints/latest exactly

The pipeline (rollout/pipeline.py) runs the rollout loop and the training loop; this file
only builds the parts: tasks and environment, policy, engine (rl_engines.py), trainer, sampler.
"""

from __future__ import annotations

import contextlib
import copy
import json
import random
import shutil
import time
from pathlib import Path

import torch

from posttrain.devices import device_record, module_device
from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import LocalEngine
from posttrain.errors import PosttrainError
from posttrain.evals.quick import evaluate_pass_at_1
from posttrain.machine import cpu_info
from posttrain.recipes.config_io import fresh_run_dir, removed_on_failure
from posttrain.recipes.rl.domains import make_scheduler
from posttrain.recipes.progress import Phases
from posttrain.recipes.rl.cluster import Preempted, Stop, make_executor, make_trainer
from posttrain.recipes.rl.config import RLRunConfig
from posttrain.recipes.rl.engines import kernel_plan_of, rollout_engine
from posttrain.recipes.rl.env import EPISODES, build_env
from posttrain.recipes.rl.heldout import heldout_gain, single_turn_eval
from posttrain.recipes.rl.tool_watch import ToolUseWatch
from posttrain.recipes.summary import RunSummary
from posttrain.rollout.envs import Environment
from posttrain.rollout.events import EventLog
from posttrain.rollout.pipeline import Pipeline
from posttrain.rollout.replay import replay
from posttrain.rollout.length import stage_metrics
from posttrain.rollout.weights import LockedEngine
from posttrain.train.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from posttrain.train.metrics import MetricsLog
from posttrain.train.tracking.fanout import Trackers
from posttrain.train.trainer import PolicyTrainer


def _prepare_run_dir(cfg: RLRunConfig, resume: bool, overwrite: bool) -> Path:
    run_dir = cfg.run_dir
    if resume:
        if latest_checkpoint(run_dir) is None:
            raise PosttrainError(f"{run_dir}: no checkpoint to resume from")
        return run_dir
    return fresh_run_dir(cfg, run_dir, overwrite, "--overwrite, --resume or another name")


def _pass_at_1(env, engine, cfg: RLRunConfig, seed: int, progress) -> dict:
    params = SamplingParams(temperature=cfg.rollout.temperature, seed=seed)
    summary, _ = evaluate_pass_at_1(env.tasks, engine, env.framer, env.group_size, params, env.agent,
                                    progress=progress)
    return summary


# Each env's held-out score, by what it declares (Environment.held_out).
HELD_OUT = {"pass@1": _pass_at_1,
            "reward": lambda env, engine, cfg, seed, progress: single_turn_eval(env, engine, seed, progress)}


def evaluate(env: Environment, engine, cfg: RLRunConfig, seed: int, progress=None) -> dict:
    """Held-out pass@1 (sandbox tasks) or mean reward (single-turn), task-clustered 95% CI;
    `progress(n)`: n more of its len(task_ids) * group_size episodes finished."""
    if not env.task_ids:
        return {}
    return HELD_OUT[env.held_out](env, engine, cfg, seed, progress)


def _evaluate(env, engine, cfg: RLRunConfig, phases: Phases, label: str) -> dict:
    """The held-out eval, its episodes counted in phase `label` as they finish."""
    return evaluate(env, engine, cfg, cfg.seed + 424_242, progress=lambda n: phases.advance(label, n=n))


def _truncate_lines(path: Path, n: int) -> None:
    """Keep the first n lines: what a killed run wrote after its last checkpoint is redone."""
    if path.is_file():
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)[:n]
        path.write_text("".join(lines), encoding="utf-8")


def replay_rl(cfg: RLRunConfig) -> Path:
    """Re-train from the run's initial policy on its recorded batches (rollout.record_batches);
    writes RUN/replay/metrics.jsonl, which matches the run's trainer metrics."""
    run_dir = cfg.run_dir
    if not (run_dir / "batches").is_dir():
        raise PosttrainError(f"{run_dir}/batches: nothing recorded (set rollout.record_batches = true)")
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    env, _, model, tok, domain_ids = build_env(cfg, run_dir / "replay", None)
    engine = LockedEngine(LocalEngine(copy.deepcopy(model), tok))  # replay never generates
    trainer = PolicyTrainer(model, tok.pad_token_id, cfg.optim, reference=cfg.algo.kl_coef > 0)
    pipeline = Pipeline(env, engine, trainer, make_scheduler(cfg, domain_ids), cfg.rollout, cfg.algo)
    log = MetricsLog(run_dir / "replay")
    replay(pipeline, run_dir / "batches", lambda step, stats: log.log("rl", step, stats))
    log.close()
    return run_dir / "replay" / "metrics.jsonl"


def run_rl(cfg: RLRunConfig, resume: bool = False, overwrite: bool = False, console=None) -> dict:
    """Run (or resume) the job; a trainer rank that dies resumes it from the last checkpoint,
    up to cluster.rank_failures times."""
    from posttrain.train.ranks import TrainerRankLost

    for failures in range(cfg.cluster.rank_failures + 1):
        try:
            return _run_rl_once(cfg, resume, overwrite, console)
        except TrainerRankLost:
            if failures == cfg.cluster.rank_failures or latest_checkpoint(cfg.run_dir) is None:
                raise
            resume, overwrite = True, False
    raise AssertionError("unreachable")


def _run_rl_once(cfg: RLRunConfig, resume: bool, overwrite: bool, console) -> dict:
    """Train, evaluate before and after, write RUN/summary.json. A fresh run that fails before
    its first checkpoint leaves no directory behind; a run whose every step was skipped (no
    trainable group) is an error after its summary is written."""
    t_start = time.perf_counter()
    run_dir = _prepare_run_dir(cfg, resume, overwrite)
    ckpt = latest_checkpoint(run_dir) if resume else None
    with removed_on_failure(run_dir, keep=lambda: resume or latest_checkpoint(run_dir) is not None), \
            Trackers(cfg.tracking, run_dir, cfg.model_dump(mode="json"), cfg.name) as trackers:
        summary = _train(cfg, run_dir, ckpt, console, trackers)
        if not summary.get("preempted"):   # the run is over: no episode is left to resume
            shutil.rmtree(run_dir / EPISODES, ignore_errors=True)
        summary["wall_s"] = round(time.perf_counter() - t_start, 1)
        summary["cpu"] = cpu_info()
        if (final := latest_checkpoint(run_dir)) is not None and not summary.get("preempted"):
            summary["policy"] = str(final / "model")  # the final policy, an HF checkpoint directory
        RunSummary.of(summary).write(run_dir)
        trackers.finish(summary)
    if "paired_diff" in summary:
        from posttrain.recipes.report import write_rl_report  # matplotlib: only where a report is drawn

        write_rl_report(run_dir, summary, _rl_history(run_dir / "metrics.jsonl"))
    if not summary.get("preempted") and summary["steps_trained"] == 0:
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(summary["episode_statuses"].items()))
        raise PosttrainError(
            f"all {summary['steps']} steps were skipped: no group had a trainable episode with a "
            f"reward signal (episodes: {statuses}); every group's rewards were equal, e.g. the policy "
            "solves none or all of the tasks, or its episodes failed. Summary: "
            f"{run_dir / 'summary.json'}")
    return summary


def _rl_history(path: Path) -> list[dict]:
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    return [r for r in map(json.loads, lines) if r.get("phase") == "rl"]


def _warn(console):
    return (lambda text: console.print(f"[yellow]warning:[/yellow] {text}", highlight=False)) \
        if console is not None else (lambda text: None)


def _train(cfg: RLRunConfig, run_dir: Path, ckpt: Path | None, console, trackers: Trackers) -> dict:
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    totals = {"setup": 1, "eval_before": 0, "rl": cfg.rollout.steps, "eval_after": 0}
    with Phases(console, totals, coarse=("eval_before", "eval_after")) as phases, \
            contextlib.ExitStack() as stack, Preempted() as preempted:
        executor = stack.enter_context(make_executor(cfg, run_dir))
        env, held_env, model, tok, domain_ids = build_env(cfg, run_dir, ckpt, _warn(console))
        judge = env.reward_fn if env.judged else None   # rollout/judge.py
        engine, env = stack.enter_context(rollout_engine(cfg, model, tok, env))
        trainer = make_trainer(cfg, model, tok.pad_token_id, run_dir)
        stack.callback(trainer.close)
        extra: dict = {}
        if ckpt is not None:
            state = load_checkpoint(ckpt, model, trainer)
            extra = {"skipped_steps": 0} | state["recipe"]
            _truncate_lines(run_dir / "metrics.jsonl", extra["metrics_lines"])
            _truncate_lines(run_dir / "events.jsonl", state["pipeline"]["events"])
        record = run_dir / "batches" if cfg.rollout.record_batches else None
        pipeline = Pipeline(*executor.wrap(env, engine), trainer, make_scheduler(cfg, domain_ids),
                            cfg.rollout, cfg.algo, EventLog(run_dir / "events.jsonl"), record)
        phases.advance("setup")
        for label in ("eval_before", "eval_after"):     # held-out episodes, known once the env is
            phases.set_total(label, len(held_env.task_ids) * held_env.group_size)
        if ckpt is not None:
            pipeline.load_state_dict(state["pipeline"])
            phases.advance("rl", n=pipeline.step)
        else:
            extra = {"eval_before": _evaluate(held_env, engine, cfg, phases, "eval_before"), "metrics_lines": 0,
                     "skipped_steps": 0}
        log = MetricsLog(run_dir, trackers)

        watch = ToolUseWatch(env)

        def on_step(step: int, stats: dict) -> None:
            stats |= executor.metrics() | (judge.metrics() if judge is not None else {})
            stats |= stage_metrics(cfg.rollout.length_curriculum, step)
            log.log("rl", step, stats)
            watch.check(step, stats)
            extra["metrics_lines"] += 1
            extra["skipped_steps"] += int(stats.get("skipped", 0))
            phases.advance("rl", reward=stats["reward_mean"], stale=stats["staleness_mean"],
                           idle=stats["trainer_idle_frac"])
            every = cfg.rollout.checkpoint_every
            if (every and (step + 1) % every == 0) or step + 1 == cfg.rollout.steps or preempted.asked:
                save_checkpoint(run_dir, step + 1, model, tok, trainer,
                                {"pipeline": pipeline.state_dict(), "recipe": extra})
            if preempted.asked and step + 1 < cfg.rollout.steps:
                raise Stop
        with contextlib.suppress(Stop):
            pipeline.run(on_step)
        log.close()
        pipeline.events.close()
        if preempted.asked:  # checkpointed after the step in progress; --resume goes on from there
            return {"preempted": True, "steps": pipeline.step + 1, "trajectories": pipeline.trajectories,
                    "audit": pipeline.audit()}
        after = _evaluate(held_env, engine, cfg, phases, "eval_after")
    return {"eval_before": extra["eval_before"], "eval_after": after, "steps": pipeline.step,
            **heldout_gain(extra["eval_before"], after),
            "steps_trained": pipeline.step - extra["skipped_steps"],
            "trajectories": pipeline.trajectories, "episode_statuses": dict(pipeline.finished),
            "seed": cfg.seed, "max_staleness": cfg.rollout.max_staleness, "audit": pipeline.audit(),
            "trainer": getattr(trainer, "setup", {}), "engine": _engine_dtype(cfg),
            "device": device_record(module_device(model)),
            "kernel_plan": kernel_plan_of(cfg, model),
            **({"judge": judge.metrics()} if judge is not None else {})}


def _engine_dtype(cfg: RLRunConfig) -> dict:
    choice = cfg.engines.compute_dtype
    return {"dtype": choice.name, "dtype_reason": choice.reason}
