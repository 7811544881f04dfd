"""The parts `posttrain rl` trains on: the task splits, the environments over them and the
policy (a tiny model warm-started on oracle demonstrations, or an HF checkpoint framed in its
own chat template).

Held-out split of `tasks.kind = "dir"`: `tasks.eval_path` when given, else the last
`tasks.n_eval` task directories in name order (refused if that leaves no training task).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Callable

from posttrain.agent.chat import SYSTEM_PROMPT, ChatFramer
from posttrain.agent.demos import demo_episode, play_oracles, transcript_texts
from posttrain.agent.framing import framer_for, single_turn
from posttrain.engine.tiny import build_tiny_model, build_tokenizer, load_policy
from posttrain.errors import ConfigError, PosttrainError, TaskError
from posttrain.recipes.rl_config import RLRunConfig, TasksConfig
from posttrain.rollout.envs import SandboxEnv, SingleTurnEnv
from posttrain.rollout.single_turn import REWARDS, copy_prompts
from posttrain.tasks.suites import terminal_basics
from posttrain.tasks.task import read_task
from posttrain.types import Episode

Warn = Callable[[str], None]


def read_task_dir(root: Path, what: str, warn: Warn) -> list:
    """Every readable task under root; unreadable ones are counted and the first reason shown."""
    if not root.is_dir():
        raise ConfigError(f"{what} {root} is not a directory of Harbor task directories")
    tasks, bad = [], []
    for p in sorted(x for x in root.iterdir() if x.is_dir()):
        try:
            tasks.append(read_task(p))
        except TaskError as e:
            bad.append(str(e))
    if bad:
        warn(f"skipped {len(bad)} of {len(bad) + len(tasks)} task directories in {root}; first: {bad[0]}")
    if not tasks:
        raise PosttrainError(f"no valid tasks in {root}" + (f": {bad[0]}" if bad else ""))
    return tasks


def dir_splits(t: TasksConfig, warn: Warn) -> tuple[list, list]:
    if not t.path:
        raise ConfigError('tasks.kind = "dir" needs tasks.path, a directory of Harbor task dirs')
    tasks = read_task_dir(Path(t.path), "tasks.path", warn)
    if t.eval_path:
        return tasks, read_task_dir(Path(t.eval_path), "tasks.eval_path", warn)
    if len(tasks) <= t.n_eval:
        raise ConfigError(f"{t.path} has {len(tasks)} tasks: too few to hold out tasks.n_eval = "
                          f"{t.n_eval} and train on the rest; set tasks.eval_path to a held-out "
                          "directory, or a smaller tasks.n_eval (0 skips the held-out evals)")
    return tasks[:len(tasks) - t.n_eval], tasks[len(tasks) - t.n_eval:]


def sandbox_splits(cfg: RLRunConfig, run_dir: Path, warn: Warn) -> tuple[list, list]:
    t = cfg.tasks
    if t.kind == "terminal-basics":
        train = terminal_basics.generate(run_dir / "tasks" / "train", t.n_train, cfg.seed, "train")
        held = terminal_basics.generate(run_dir / "tasks" / "heldout", t.n_eval, cfg.seed + 1, "heldout")
        return train, held
    return dir_splits(t, warn)


def _sft(cfg: RLRunConfig, model, pad_id: int, demos: list[Episode]) -> None:
    from posttrain.train.trainer import OptimConfig, PolicyTrainer

    trainer = PolicyTrainer(model, pad_id, OptimConfig(lr=cfg.policy.sft_lr, micro_batch=32))
    rng = random.Random(cfg.seed)
    for _ in range(cfg.policy.sft_steps):
        trainer.sft_step(rng.sample(demos, min(cfg.policy.sft_batch, len(demos))))


def _policy(cfg: RLRunConfig, resume_from: Path | None, corpus_and_demos):
    """The checkpoint being resumed, the HF checkpoint of policy.init, or a tiny model with a
    tokenizer trained on the corpus and warm-started on demonstrations."""
    if resume_from is not None:
        return load_policy(resume_from / "model")
    if cfg.policy.init != "scratch":
        return load_policy(cfg.policy.init)
    corpus, demos_of = corpus_and_demos()
    tokenizer = build_tokenizer(corpus, vocab_size=cfg.policy.vocab_size)
    model = build_tiny_model(len(tokenizer), preset=cfg.policy.preset, seed=cfg.seed)
    if cfg.policy.sft_steps:
        _sft(cfg, model, tokenizer.pad_token_id, demos_of(tokenizer))
    return model, tokenizer


def _demonstrations(cfg: RLRunConfig, train: list, warn: Warn):
    """(corpus, demos_of) from the oracle turns of the training tasks that have them."""
    playable = [t for t in train if t.oracle_steps() is not None]
    if not playable:
        raise PosttrainError(
            'policy.init = "scratch" builds a tokenizer and warm-starts a tiny model from oracle '
            f"demonstrations (solution/steps.json), which none of the {len(train)} training tasks "
            f"has (first: {train[0].id}); set policy.init to an HF model directory (e.g. from "
            "`posttrain models import`) or add solution/steps.json to the tasks")
    transcripts = play_oracles(playable, cfg.agent)
    solved = [x for x in transcripts if x.reward >= 1]
    if len(solved) < len(train):
        first = next((x.task_id for x in transcripts if x.reward < 1), None) or \
            next(t.id for t in train if t.oracle_steps() is None)
        warn(f"demonstrations from {len(solved)} of {len(train)} training tasks (the others have no "
             f"solution/steps.json or their oracle fails; first: {first})")
    if not solved:
        raise PosttrainError("no demonstrations: the oracle solves none of the training tasks")
    corpus = [SYSTEM_PROMPT] + [s for x in solved for s in transcript_texts(x)]
    return corpus, lambda tok: [demo_episode(x, ChatFramer(tok)) for x in solved]


def _copy_envs(cfg: RLRunConfig, resume_from: Path | None):
    g, t = cfg.rollout.group_size, cfg.tasks
    if t.reward not in REWARDS:
        raise ConfigError(f"unknown reward {t.reward!r}; known: {sorted(REWARDS)}")
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
    model, tok = _policy(cfg, resume_from, corpus_and_demos)
    frame, end_id = single_turn(tok)
    train, held = copy_prompts(t.n_train, cfg.seed, frame=frame), copy_prompts(t.n_eval, cfg.seed + 1, frame=frame)
    kw = dict(tokenizer=tok, reward_fn=REWARDS[t.reward], max_tokens=t.max_tokens,
              max_context=model.config.max_position_embeddings, temperature=cfg.rollout.temperature,
              stop_token_ids=[end_id], chunk_tokens=t.chunk_tokens)
    return SingleTurnEnv(train, group_size=g, **kw), SingleTurnEnv(held, group_size=t.eval_samples, **kw), model, tok


def build_env(cfg: RLRunConfig, run_dir: Path, resume_from: Path | None, warn: Warn = lambda s: None):
    """(train env, held-out env, model, tokenizer) for the configured task kind."""
    if cfg.tasks.kind == "copy":
        return _copy_envs(cfg, resume_from)
    train, held = sandbox_splits(cfg, run_dir, warn)
    model, tok = _policy(cfg, resume_from, lambda: _demonstrations(cfg, train, warn))
    framer = framer_for(tok)
    g, agent, temp = cfg.rollout.group_size, cfg.agent, cfg.rollout.temperature
    env = SandboxEnv(train, framer, agent, g, temp, cfg.rollout.episode_timeout_s)
    return env, SandboxEnv(held, framer, agent, cfg.tasks.eval_samples, temp), model, tok
