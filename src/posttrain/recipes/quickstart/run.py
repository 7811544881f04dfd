"""The quickstart recipe: tasks → SFT warm start → held-out eval → GRPO → eval again.

Everything runs in one process: the terminal-basics suite is generated, the oracle turns
are played through the real sandbox to make demonstrations, a tokenizer and a tiny Llama are
built in-process, then trained and sampled on the device chosen once (`device`: a GPU where
torch sees one, else the CPU; docs/gpu.md). GRPO runs on `posttrain rl`'s pipeline
(rollout/pipeline.py), synchronous. The run directory
gets the config, metrics (JSONL + TensorBoard), samples, an HF checkpoint,
summary.json and report.html.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import torch

from posttrain.agent.chat import SYSTEM_PROMPT, ChatFramer
from posttrain.agent.demos import demo_episode, play_oracles, transcript_texts
from posttrain.devices import device_record, resolve_device
from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import LocalEngine
from posttrain.errors import PosttrainError
from posttrain.evals.quick import evaluate_pass_at_1, pass_scores
from posttrain.evals.stats import paired_gain
from posttrain.machine import cpu_info
from posttrain.models.tiny import build_tiny_model, build_tokenizer, save_policy
from posttrain.recipes.config_io import fresh_run_dir, removed_on_failure
from posttrain.recipes.progress import Phases
from posttrain.recipes.quickstart.config import QuickstartConfig
from posttrain.recipes.quickstart.samples import write_samples
from posttrain.recipes.report import write_report
from posttrain.recipes.summary import RunSummary
from posttrain.rollout.config import RolloutConfig
from posttrain.rollout.envs import SandboxEnv
from posttrain.rollout.pipeline import Pipeline
from posttrain.rollout.weights import LockedEngine
from posttrain.sandbox.reaper import reap
from posttrain.schedule.sampler import TaskSampler
from posttrain.tasks.suites import terminal_basics
from posttrain.train.advantages import group_stats
from posttrain.train.metrics import MetricsLog
from posttrain.train.tracking.fanout import Trackers
from posttrain.train.trainer import PolicyTrainer


def _prepare_run_dir(cfg: QuickstartConfig, overwrite: bool) -> Path:
    return fresh_run_dir(cfg, cfg.run_dir, overwrite, "--overwrite or another --name")


def _seed_everything(seed: int, threads: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)


def _make_tasks(cfg: QuickstartConfig, run_dir: Path):
    """Three disjoint splits from three seeds: SFT demos, RL tasks, held-out tasks.
    RL runs on tasks the SFT never saw, so its gains are not memorisation."""
    def split(name: str, n: int, offset: int):
        return terminal_basics.generate(run_dir / "tasks" / name, n, seed=cfg.seed + offset,
                                        split=name)
    return (split("train", cfg.n_train_tasks, 0), split("rl", cfg.n_rl_tasks, 2),
            split("heldout", cfg.n_eval_tasks, 1))


def _build_policy(cfg: QuickstartConfig, transcripts):
    corpus = [SYSTEM_PROMPT] + [text for t in transcripts for text in transcript_texts(t)]
    tokenizer = build_tokenizer(corpus, vocab_size=cfg.vocab_size)
    model = build_tiny_model(len(tokenizer), preset=cfg.model_preset, seed=cfg.seed)
    return model, tokenizer


def _sft(cfg, trainer, demos, log, phases) -> None:
    rng = random.Random(cfg.seed)
    for step in range(cfg.sft.steps):
        batch = [demos[i] for i in rng.sample(range(len(demos)), min(cfg.sft.batch, len(demos)))]
        stats = trainer.sft_step(batch)
        log.log("sft", step, stats)
        phases.advance("sft", loss=stats["loss"])


def _rl(cfg, trainer, engine, framer, rl_tasks, log, run_dir, phases) -> list[dict]:
    """GRPO through `posttrain rl`'s pipeline, synchronous (staleness 0): each step collects
    one wave of groups on the current weights, trains on them and publishes the next version."""
    if cfg.rl.steps == 0:
        return []
    c = cfg.rl
    env = SandboxEnv(rl_tasks, framer, cfg.agent, c.group_size, c.algo.temperature)
    # Every group is trained, with or without reward variance (Dr.GRPO gives a flat group no
    # gradient): the step's batch is exactly its tasks_per_step groups.
    rollout = RolloutConfig(steps=c.steps, groups_per_step=c.tasks_per_step, group_size=c.group_size,
                            max_staleness=0, overprovision=0, filter_zero_variance=False,
                            temperature=c.algo.temperature)
    pipeline = Pipeline(env, LockedEngine(engine), trainer, TaskSampler(env.task_ids, cfg.seed + 7),
                        rollout, c.algo)
    history = []

    def on_step(step: int, stats: dict) -> None:
        episodes = [e for g in pipeline.last_batch for e in g.episodes]
        stats |= group_stats(episodes)
        log.log("rl", step, stats)
        history.append({"step": step, **stats})
        write_samples(run_dir / "samples" / f"rl-step-{step:04d}.txt", episodes,
                      framer.tokenizer, c.samples_per_step)
        phases.advance("rl", reward=stats["reward_mean"])

    pipeline.run(on_step)
    return history


def _evaluate(cfg, engine, framer, tasks, phases, label: str, run_dir: Path) -> dict:
    params = SamplingParams(temperature=cfg.rl.algo.temperature, seed=cfg.seed + 424_242)
    summary, episodes = evaluate_pass_at_1(
        tasks, engine, framer, cfg.eval_samples, params, cfg.agent,
        progress=lambda n: phases.advance(label, n=n))
    write_samples(run_dir / "samples" / f"{label}.txt", episodes, framer.tokenizer, 6)
    return summary, pass_scores(episodes)


def run_quickstart(cfg: QuickstartConfig, overwrite: bool = False, console=None) -> dict:
    """Run the whole recipe; returns summary.json's content. A run that fails leaves no
    directory behind (nothing in it could be resumed)."""
    t_start = time.perf_counter()
    device = resolve_device(cfg.device)  # once, before anything is built: a missing GPU fails here
    run_dir = _prepare_run_dir(cfg, overwrite)
    reap()  # sandboxes and cgroups that killed runs left behind slow every later one
    _seed_everything(cfg.seed, cfg.threads)
    n_eval = cfg.n_eval_tasks * cfg.eval_samples
    with removed_on_failure(run_dir, keep=lambda: False), \
            Trackers(cfg.tracking, run_dir, cfg.model_dump(mode="json"), cfg.name) as trackers, \
            Phases(console, {"demos": cfg.n_train_tasks, "sft": cfg.sft.steps,
                             "eval_before": n_eval, "rl": cfg.rl.steps, "eval_after": n_eval},
                   coarse=("eval_before", "eval_after")) as phases:
        summary, history = _train_and_evaluate(cfg, run_dir, phases, device, trackers)
        summary |= {"wall_s": round(time.perf_counter() - t_start, 1), "seed": cfg.seed,
                    "cpu": cpu_info(), "device": device_record(device)}
        RunSummary.of(summary).write(run_dir)
        trackers.finish(summary)
    write_report(run_dir, summary, history)
    return summary


def _train_and_evaluate(cfg: QuickstartConfig, run_dir: Path, phases, device: torch.device,
                        trackers: Trackers | None = None) -> tuple[dict, list[dict]]:
    """Demos, SFT, held-out eval, GRPO, held-out eval on `device`; saves the checkpoint. The
    trainers and the engine share one model there."""
    train_tasks, rl_tasks, heldout = _make_tasks(cfg, run_dir)
    transcripts = play_oracles(train_tasks, cfg.agent)
    bad = [t for t in transcripts if t.reward < 1]
    if bad:
        raise PosttrainError(f"oracle failed on {len(bad)} generated tasks, e.g. "
                             f"{bad[0].task_id}: {bad[0].failure}")
    phases.advance("demos", n=len(transcripts))
    model, tokenizer = _build_policy(cfg, transcripts)
    model = model.to(device)
    framer = ChatFramer(tokenizer)
    demos = [demo_episode(t, framer) for t in transcripts]
    log = MetricsLog(run_dir, trackers)
    trainer = PolicyTrainer(model, tokenizer.pad_token_id, cfg.sft.optim, device=device)
    _sft(cfg, trainer, demos, log, phases)
    engine = LocalEngine(model, tokenizer, device=device)
    before, before_scores = _evaluate(cfg, engine, framer, heldout, phases, "eval_before", run_dir)
    trainer = PolicyTrainer(model, tokenizer.pad_token_id, cfg.rl.optim, reference=cfg.rl.algo.kl_coef > 0,
                            device=device)
    history = _rl(cfg, trainer, engine, framer, rl_tasks, log, run_dir, phases)
    after, after_scores = _evaluate(cfg, engine, framer, heldout, phases, "eval_after", run_dir)
    log.close()
    save_policy(model, tokenizer, run_dir / "checkpoint")
    engine_info = {"dtype": engine.dtype.name, "dtype_reason": engine.dtype.reason,
                   "batch_invariant": engine.config.batch_invariant, "attention": engine.attention_backend[0],
                   "gemm": engine.gemm}
    # RL - SFT on the same held-out tasks and samples, paired by task: the test with power here,
    # since the starting point moves a lot between seeds
    return {"eval_before": before, "eval_after": after, **paired_gain(before_scores, after_scores),
            "engine": engine_info, "kernel_plan": engine.plan.as_dict()}, history
