"""The parts `posttrain rl` trains on: the task splits, the environments over them and the
policy (a tiny model warm-started on oracle demonstrations, or an HF checkpoint framed in its
own chat template).

Task sources and held-out splits: recipes/rl/domains.py (sandbox tasks, one path for [tasks] and
[[domains]]); tasks.kind = "copy" (a built-in phrase-copy task) and "single-turn" (a directory
of single-turn tasks, e.g. `posttrain tasks generate DIR --suite instruct`) are prompts, built here.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Callable, NamedTuple

from posttrain.agent.chat import SYSTEM_PROMPT
from posttrain.agent.demos import demo_episode, play_oracles, transcript_texts
from posttrain.agent.framing import framer_for, single_turn
from posttrain.devices import resolve_device
from posttrain.errors import ConfigError, PosttrainError
from posttrain.models.rope import with_rope_scaling
from posttrain.models.tiny import build_tiny_model, build_tokenizer, load_policy
from posttrain.recipes.rl.domains import read_task_dir, sandbox_tasks
from posttrain.recipes.rl.config import RLRunConfig
from posttrain.rollout.envs import Environment, SandboxEnv, SingleTurnEnv
from posttrain.rollout.judge import open_judge
from posttrain.rollout.single_turn import REWARDS, copy_prompts, reply_score, task_prompts
from posttrain.types import Episode

HF_SFT_MICRO_BATCH = 2   # demonstrations per forward of a real model: its activations, not the batch, set memory
EPISODES = "episodes"   # RUN/episodes: per-turn episode checkpoints (rollout.episode_checkpoints)

Warn = Callable[[str], None]


class RunParts(NamedTuple):
    """What build_env returns; domain_ids (each domain's task ids) is make_scheduler's input."""

    env: Environment
    held_env: Environment
    model: object
    tokenizer: object
    domain_ids: list[list[str]]


def _sft(cfg: RLRunConfig, model, pad_id: int, demos: list[Episode], steps: int, micro_batch: int = 32,
         **transforms) -> None:
    """transforms: OptimConfig's compute_dtype / logprob_chunk for the warm start (never LoRA:
    the engines copy this model as it is)."""
    from posttrain.train.trainer import OptimConfig, PolicyTrainer

    optim = OptimConfig(lr=cfg.policy.sft_lr, micro_batch=micro_batch, **transforms)
    trainer = PolicyTrainer(model, pad_id, optim)
    rng = random.Random(cfg.seed)
    for _ in range(steps):
        trainer.sft_step(rng.sample(demos, min(cfg.policy.sft_batch, len(demos))))


def _policy(cfg: RLRunConfig, resume_from: Path | None, corpus_and_demos, device):
    """The checkpoint being resumed, the HF checkpoint of policy.init (SFT'd on demonstrations
    for policy.hf_sft_steps), or a tiny model with a tokenizer trained on the corpus and
    warm-started on demonstrations for policy.sft_steps; policy.rope_scaling is applied before
    any SFT, so the warm start already tunes the scaled model. On `device`, before any SFT:
    the trainer, the engines and the reference copy it from there."""
    if resume_from is not None:
        model, tokenizer = load_policy(resume_from / "model")
        return _scaled(cfg, model).to(device), tokenizer
    if cfg.policy.init != "scratch":
        model, tokenizer = load_policy(cfg.policy.init)
        model = _scaled(cfg, model).to(device)
        if cfg.policy.hf_sft_steps:
            demos = corpus_and_demos()[1](tokenizer)
            _sft(cfg, model, tokenizer.pad_token_id, demos, cfg.policy.hf_sft_steps, HF_SFT_MICRO_BATCH,
                 compute_dtype=cfg.optim.compute_dtype, logprob_chunk=cfg.optim.logprob_chunk)
        return model, tokenizer
    corpus, demos_of = corpus_and_demos()
    tokenizer = build_tokenizer(corpus, vocab_size=cfg.policy.vocab_size)
    model = _scaled(cfg, build_tiny_model(len(tokenizer), preset=cfg.policy.preset, seed=cfg.seed)).to(device)
    if cfg.policy.sft_steps:
        _sft(cfg, model, tokenizer.pad_token_id, demos_of(tokenizer), cfg.policy.sft_steps)
    return model, tokenizer


def _scaled(cfg: RLRunConfig, model):
    """The model with policy.rope_scaling applied (in place); a resumed checkpoint already has it
    in its config, and applying it again changes nothing."""
    rope = cfg.policy.rope_scaling
    return model if rope is None else with_rope_scaling(model, rope.kind, rope.factor, rope.original_max)


def _demonstrations(cfg: RLRunConfig, train: list, warn: Warn):
    """(corpus, demos_of) from the oracle turns of the training tasks that have them."""
    playable = [t for t in train if t.oracle_steps() is not None]
    if not playable:
        lacking = (f"oracle demonstrations (solution/steps.json), which none of the {len(train)} "
                   f"training tasks has (first: {train[0].id})")
        if cfg.policy.init != "scratch":
            raise PosttrainError(f"policy.hf_sft_steps warm-starts the model on {lacking}; set "
                                 "policy.hf_sft_steps = 0 or add solution/steps.json to the tasks")
        raise PosttrainError(
            f'policy.init = "scratch" builds a tokenizer and warm-starts a tiny model from {lacking};'
            " set policy.init to an HF model directory (e.g. from `posttrain models import`) or add"
            " solution/steps.json to the tasks")
    transcripts = play_oracles(playable, cfg.agent)
    solved = [x for x in transcripts if x.reward >= 1]
    if len(solved) < len(train):
        failed = next((x for x in transcripts if x.reward < 1), None)
        first = f"{failed.task_id}: {failed.failure}" if failed else \
            next(t.id for t in train if t.oracle_steps() is None)
        warn(f"demonstrations from {len(solved)} of {len(train)} training tasks (the others have no "
             f"solution/steps.json or their oracle fails; first: {first})")
    if not solved:
        raise PosttrainError("no demonstrations: the oracle solves none of the training tasks")
    corpus = [SYSTEM_PROMPT] + [s for x in solved for s in transcript_texts(x)]
    return corpus, lambda tok: [demo_episode(x, framer_for(tok), cfg.agent.harness) for x in solved]


def _copy_envs(cfg: RLRunConfig, resume_from: Path | None, device):
    g, t = cfg.rollout.group_size, cfg.tasks
    if cfg.policy.init != "scratch" and cfg.policy.hf_sft_steps:
        raise ConfigError("policy.hf_sft_steps needs sandbox tasks with solution/steps.json, not the copy task")
    if t.reward not in REWARDS and t.reward != "judge":
        raise ConfigError(f"unknown reward {t.reward!r}; known: {sorted(REWARDS) + ['judge']}")
    texts = copy_prompts(t.n_train, cfg.seed), copy_prompts(t.n_eval, cfg.seed + 1)

    def corpus_and_demos():
        train, held = texts
        corpus = [p.text for p in train + held] + [p.target for p in train]

        def demos(tok):
            eps = []
            for p in train:
                e = Episode(p.id, 0)
                e.append(tok.encode(p.text, add_special_tokens=False), sampled=False)
                ids = tok.encode(p.target + "<|end|>", add_special_tokens=False)
                e.append(ids, sampled=True, logprobs=[0.0] * len(ids))
                eps.append(e)
            return eps
        return corpus, demos
    model, tok = _policy(cfg, resume_from, corpus_and_demos, device)
    frame, end_id = single_turn(tok)
    train, held = copy_prompts(t.n_train, cfg.seed, frame=frame), copy_prompts(t.n_eval, cfg.seed + 1, frame=frame)
    judge = _judge(cfg, device)
    kw = dict(tokenizer=tok, reward_fn=judge or REWARDS[t.reward], judged=judge is not None,
              max_tokens=t.max_tokens, max_context=model.config.max_position_embeddings,
              temperature=cfg.rollout.temperature, stop_token_ids=[end_id], chunk_tokens=t.chunk_tokens)
    env = SingleTurnEnv(train, group_size=g, lengths=cfg.rollout.length_curriculum, **kw)
    return RunParts(env, SingleTurnEnv(held, group_size=t.eval_samples, **kw), model, tok, [env.task_ids])


def _judge(cfg: RLRunConfig, device):
    """The judge model of tasks.reward = "judge" (rollout/judge.py) on the run's device, or None."""
    return open_judge(cfg.judge, device) if cfg.tasks.reward == "judge" else None


def _single_turn_tasks(cfg: RLRunConfig, warn: Warn) -> tuple[list, list]:
    """(train, held-out) single-turn tasks: tasks.path, and tasks.eval_path or its last n_eval."""
    t = cfg.tasks
    if not t.path:
        raise ConfigError('tasks.kind = "single-turn" needs tasks.path, a directory of single-turn tasks '
                          "(e.g. from `posttrain tasks generate DIR --suite instruct`)")
    train = read_task_dir(Path(t.path), "tasks.path", warn)
    if t.eval_path:
        return train, read_task_dir(Path(t.eval_path), "tasks.eval_path", warn)
    if len(train) <= t.n_eval:
        raise ConfigError(f"{t.path} has {len(train)} tasks: too few to hold out tasks.n_eval = {t.n_eval}; "
                          "set tasks.eval_path (e.g. a --split heldout directory) or a smaller tasks.n_eval")
    cut = len(train) - t.n_eval
    return train[:cut], train[cut:]


def _prompts(tasks: list, frame, what: str) -> list:
    try:
        return task_prompts(tasks, frame)
    except ValueError as e:
        raise ConfigError(f'{what}: tasks.kind = "single-turn" trains on one reply per task; {e} '
                          '(sandbox tasks: tasks.kind = "dir")') from None


def _single_turn_envs(cfg: RLRunConfig, resume_from: Path | None, warn: Warn, device) -> RunParts:
    """Envs over a directory of single-turn tasks in the checkpoint's own chat template, scored
    by the suite's scorer (reward and details: strict, met:FAMILY). The held-out env is greedy,
    one reply per task: the before/after scores compare like with like."""
    t = cfg.tasks
    if cfg.policy.init == "scratch" and resume_from is None:
        raise ConfigError('tasks.kind = "single-turn" needs policy.init = an HF model directory '
                          "(e.g. from `posttrain models import`), not \"scratch\"")
    if cfg.policy.hf_sft_steps:
        raise ConfigError("policy.hf_sft_steps needs sandbox tasks with solution/steps.json, not single-turn tasks")
    train_tasks, held_tasks = _single_turn_tasks(cfg, warn)
    model, tok = _policy(cfg, resume_from, None, device)
    frame, end_id = single_turn(tok)
    train = _prompts(train_tasks, frame, t.path)
    held = _prompts(held_tasks, frame, t.eval_path or t.path)
    judge = _judge(cfg, device)
    kw = dict(tokenizer=tok, reward_fn=judge or reply_score, judged=judge is not None,
              max_tokens=t.max_tokens, max_context=model.config.max_position_embeddings,
              stop_token_ids=[end_id], chunk_tokens=t.chunk_tokens)
    env = SingleTurnEnv(train, group_size=cfg.rollout.group_size, temperature=cfg.rollout.temperature,
                        lengths=cfg.rollout.length_curriculum, **kw)
    return RunParts(env, SingleTurnEnv(held, group_size=1, temperature=0.0, **kw), model, tok, [env.task_ids])


def build_env(cfg: RLRunConfig, run_dir: Path, resume_from: Path | None, warn: Warn = lambda s: None) -> RunParts:
    """The train and held-out envs, the policy and each domain's task ids: single-turn
    prompts (tasks.kind = "copy" or "single-turn") or the sandbox tasks of every domain. The
    run's device is resolved here, once (cfg.device, devices.py): the policy (and a judge)
    is put there, and the trainer and engines follow the policy."""
    device = resolve_device(cfg.device)
    if cfg.tasks.kind == "copy":
        return _copy_envs(cfg, resume_from, device)
    if cfg.tasks.kind == "single-turn":
        return _single_turn_envs(cfg, resume_from, warn, device)
    tasks = sandbox_tasks(cfg, run_dir, warn)
    model, tok = _policy(cfg, resume_from, lambda: _demonstrations(cfg, tasks.train, warn), device)
    framer = framer_for(tok)
    g, agent, temp = cfg.rollout.group_size, cfg.agent, cfg.rollout.temperature
    contexts = {d.name: d.context for d in cfg.domains if d.context is not None}
    stored = run_dir / EPISODES if cfg.rollout.episode_checkpoints else None
    env = SandboxEnv(tasks.train, framer, agent, g, temp, cfg.rollout.episode_timeout_s, contexts, stored,
                     cfg.rollout.length_curriculum)
    held = SandboxEnv(tasks.held, framer, agent, cfg.tasks.eval_samples, temp, contexts=contexts)
    return RunParts(env, held, model, tok, tasks.domain_ids)
