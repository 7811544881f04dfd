"""Workloads for bench/schedule.py: a real pipeline run on a long-tailed synthetic
environment, and the costs it measured.

SleepEnv is a real environment for the real Pipeline: each group's G replies are sampled
by the real (tiny) engine, then each episode's "verifier" sleeps a lognormal time (the
long tail) and rewards it with the task's known pass rate. Each episode is an agent's
second turn: the task line, then an observation of `obs_tokens` tokens that differs per
episode (a tool's output), then the sampled reply. The trainer computes every episode's
whole context (no prompt is shared within a group), so its step is real compute comparable
to the rollout side's pace, while the engine only prefills the observations once. Episodes record generate_s and
verify_s, as sandbox episodes do. The verifier times are drawn, not slept one by one: the
wave sleeps until its last verifier would end (a thread per episode would load the GIL).
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from dataclasses import dataclass, field

import torch

from posttrain.engine.affinity import split_cores
from posttrain.engine.base import SamplingParams
from posttrain.engine.paged.local import LocalEngine
from posttrain.engine.process import ProcessEngine
from posttrain.models.tiny import build_tiny_model, build_tokenizer
from posttrain.rollout.config import RolloutConfig
from posttrain.rollout.envs import Environment
from posttrain.rollout.events import EventLog
from posttrain.rollout.pipeline import Pipeline
from posttrain.rollout.weights import LockedEngine
from posttrain.schedule.planner import decontend
from posttrain.schedule.scheduler import DomainTasks, Scheduler
from posttrain.train.trainer import OptimConfig, PolicyTrainer, RLConfig
from posttrain.types import Episode

MODEL = dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=256, max_position_embeddings=128)  # task line + 112 + 6 tokens fit


@dataclass
class SleepEnv(Environment):
    task_ids: list[str]
    pass_rates: list[float]
    tokenizer: object
    group_size: int
    median_s: float
    sigma: float
    max_tokens: int = 6
    obs_tokens: int = 0
    waits_on_engine: bool = True                      # its threads may run on the engine's core
    verify_log: list = field(default_factory=list)   # each episode's measured verify seconds
    calls: int = 0                                    # generate calls (one per group)

    def run(self, jobs, engine) -> list[list[Episode]]:
        """Generate each group (serialised on the engine); its G verifiers start when its
        replies are done and run side by side, so the wave ends at the latest
        (generation end + slowest verifier) over its groups. One sleep, no extra threads."""
        out, t_start, done_at = [], time.perf_counter(), 0.0
        for job in jobs:
            rng = random.Random(f"{job.seed}/{job.uid}")
            prompts = self._prompts(job.task_id, rng)
            params = SamplingParams(temperature=1.0, max_tokens=self.max_tokens, seed=job.seed)
            t0 = time.perf_counter()
            comps = engine.generate(prompts, params)
            gen_end = time.perf_counter()
            self.calls += 1
            group = []
            for prompt, comp in zip(prompts, comps):
                ep = Episode(job.task_id, job.uid)
                ep.append(prompt, sampled=False)
                ep.append(comp.token_ids, sampled=True, logprobs=comp.logprobs, version=comp.policy_version)
                ep.prompt_len = len(prompt)
                ep.timings["generate_s"] = (gen_end - t0) / self.group_size
                ep.reward = float(rng.random() < self.pass_rates[job.task_index])
                ep.timings["verify_s"] = self.median_s * math.exp(self.sigma * rng.gauss(0, 1))
                self.verify_log.append(ep.timings["verify_s"])
                group.append(ep)
            done_at = max(done_at, gen_end - t_start + max(e.timings["verify_s"] for e in group))
            out.append(group)
        time.sleep(max(0.0, done_at - (time.perf_counter() - t_start)))
        return out

    def _prompts(self, task_id: str, rng: random.Random) -> list[list[int]]:
        """The task line, then each episode's own observation (ids drawn from the vocabulary)."""
        head = self.tokenizer.encode(f"task {task_id}", add_special_tokens=False)
        top = len(self.tokenizer) - 1
        return [head + [rng.randint(4, top) for _ in range(self.obs_tokens)] for _ in range(self.group_size)]


def train_step_s(obs_tokens: int, groups: int, group_size: int, seed: int = 0) -> float:
    """The median of 3 optimizer steps of the workload's trainer on one batch like the
    runs' (B x G episodes of task line + observation + 6 sampled tokens), after a warm-up."""
    tok = build_tokenizer([f"task t{i}" for i in range(64)], vocab_size=300)
    model = build_tiny_model(len(tok), seed=seed, **MODEL)
    env = SleepEnv(["t0"], [0.5], tok, group_size, 0.0, 0.0, obs_tokens=obs_tokens)
    rng, episodes = random.Random(seed), []
    for uid in range(groups):
        for prompt in env._prompts("t0", rng):
            ep = Episode("t0", uid)
            ep.append(prompt, sampled=False)
            ep.append([rng.randint(4, len(tok) - 1) for _ in range(env.max_tokens)], sampled=True,
                      logprobs=[-1.0] * env.max_tokens, version=0)
            ep.prompt_len, ep.reward = len(prompt), float(rng.random() < 0.5)
            episodes.append(ep)
    trainer = PolicyTrainer(model, tok.pad_token_id, OptimConfig(lr=1e-3, micro_batch=64))
    times = []
    for _ in range(4):
        t0 = time.perf_counter()
        trainer.rl_step(episodes, RLConfig(tis="token"))
        times.append(time.perf_counter() - t0)
    return sorted(times[1:])[1]


def measured_run(cfg: RolloutConfig, median_s: float, sigma: float, seed: int = 0,
                 events_path=None, engine_process: bool = True, obs_tokens: int = 0) -> dict:
    """One real pipeline run; returns steady-state numbers (steps after the first) and
    the per-group costs it measured. engine_process: the engine in a child process
    (engine/process.py), so the rollout threads and the trainer do not share an
    interpreter with it; else in this process, as the default `posttrain rl` does."""
    torch.manual_seed(seed)
    n = 64
    tok = build_tokenizer([f"task t{i}" for i in range(n)], vocab_size=300)
    model = build_tiny_model(len(tok), seed=seed, **MODEL)
    with contextlib.ExitStack() as stack:
        if engine_process:  # the child on a core of its own, the trainer on the other
            child = stack.enter_context(ProcessEngine(model, tok, threads=1))
            engine = LockedEngine(child)
            engine.cores = stack.enter_context(split_cores(child.pid))
        else:
            engine = LockedEngine(LocalEngine(model.__class__(model.config), tok))
            engine.engine.model.load_state_dict(model.state_dict())
        env = SleepEnv([f"t{i}" for i in range(n)], [random.Random(seed + i).uniform(0.2, 0.8) for i in range(n)],
                       tok, cfg.group_size, median_s, sigma, obs_tokens=obs_tokens)
        return _measure(cfg, env, seed, events_path, tok, model, engine, engine_process)


def _measure(cfg, env, seed, events_path, tok, model, engine, separate: bool) -> dict:
    ids = env.task_ids
    sched = Scheduler([DomainTasks("default", ids)], seed)
    trainer = PolicyTrainer(model, tok.pad_token_id, OptimConfig(lr=1e-3, micro_batch=64))
    pipe = Pipeline(env, engine, trainer, sched, cfg, RLConfig(tis="token"), EventLog(events_path))
    rows = []
    pipe.run(lambda step, stats: rows.append(stats))
    pipe.events.close()
    out = summarise(rows, cfg, pipe)
    gen_s, train_s = engine.generate_s / max(1, env.calls), out["train_s"]
    if not separate:  # one interpreter: the contention it ran under taken out (simulate.shared_cpu),
        # trainer / (1 + engine busy share), generation / (1 + trainer busy share)
        gen_s, train_s = decontend(gen_s, train_s, out["trainer_idle_frac"], out["engine_busy_frac"])
    out["costs"] = {"gen_s": [gen_s], "verify_s": {"default": [round(x, 5) for x in env.verify_log]},
                    "train_s": train_s, "shared_cpu": not separate}
    return out


def summarise(rows: list[dict], cfg: RolloutConfig, pipe) -> dict:
    steady = rows[1:]
    wall = sum(r["step_wall_s"] for r in steady)
    idle = sum(r["trainer_idle_frac"] * r["step_wall_s"] for r in steady)
    trained = sum(r["groups"] for r in steady)
    generated = sum(pipe.finished.values()) / cfg.group_size
    busy = sum(r["engine_busy_frac"] * r["step_wall_s"] for r in steady)
    return {"throughput": trained / wall, "trainer_idle_frac": idle / wall, "wall_s": wall,
            "engine_busy_frac": busy / wall,
            "train_s": sum(r["step_wall_s"] * (1 - r["trainer_idle_frac"]) for r in steady) / len(steady),
            "publish_s": sum(r.get("publish_s", 0.0) for r in steady) / len(steady),
            # discarded: tokens of groups dropped as stale or filtered, over all generated.
            # Groups still buffered or in flight when the run stops were never discarded:
            # a longer run trains them. They are counted apart (unused_at_end_frac).
            "wasted_token_frac": (pipe.tokens["stale"] + pipe.tokens["filtered"]) / max(1, pipe.tokens["generated"]),
            "unused_at_end_frac": 1 - (pipe.taken + pipe.buffer.stats.dropped_stale) / generated if generated else 0.0,
            "dropped_stale": pipe.buffer.stats.dropped_stale, "generated_groups": generated,
            # trained although older than max_staleness (partial rollouts, carry_staleness)
            "carried_token_frac": pipe.tokens["carried"] / max(1, pipe.tokens["generated"]),
            "staleness_mean": sum(r["staleness_mean"] for r in steady) / len(steady),
            "over_issued": pipe.over_issued}
