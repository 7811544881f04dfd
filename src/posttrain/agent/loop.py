"""The multi-turn episode loop, run in lockstep over a batch of episodes.

Each turn: one batched engine.generate over every live episode, parse each reply,
run the commands in their sandboxes concurrently, append the observations.
An episode ends on <submit/>, the turn limit, the task's agent timeout or the
context limit; then its tests run and give the reward.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from posttrain.agent.chat import ChatFramer
from posttrain.agent.config import AgentConfig
from posttrain.agent.protocol import (
    MALFORMED_HINT,
    UNTERMINATED_HINT,
    format_observation,
    parse_action,
)
from posttrain.agent.trial import open_task_sandbox, verify
from posttrain.engine.base import Engine, SamplingParams
from posttrain.sandbox import Sandbox
from posttrain.tasks import Task
from posttrain.types import Completion, Episode, Turn


@dataclass
class _Live:
    task: Task
    episode: Episode
    sandbox: Sandbox | None = None
    started: float = 0.0
    done: bool = False


def _start(live: _Live, framer: ChatFramer, backend: str) -> None:
    t0 = time.perf_counter()
    live.episode.append(framer.prompt(live.task.instruction), sampled=False)
    live.episode.prompt_len = len(live.episode.tokens)
    try:
        live.sandbox = open_task_sandbox(live.task, backend)
    except Exception as e:  # a broken environment is an infra error, not a model failure
        live.episode.status, live.episode.error, live.done = "infra_error", str(e), True
    live.started = time.perf_counter()
    live.episode.timings["sandbox_start_s"] = live.started - t0


def _take_reply(live: _Live, comp: Completion, framer: ChatFramer):
    ep = live.episode
    ep.append(comp.token_ids, sampled=True, logprobs=comp.logprobs, version=comp.policy_version)
    ep.routing = comp.routing  # MoE: the engine's experts of the whole stream it was given
    text, terminated = framer.decode_reply(comp.token_ids)
    if not terminated:  # close the turn so the next observation is well framed
        ep.append([framer.end_id], sampled=False)
    return text, parse_action(text, terminated)


def _act(live: _Live, text: str, action, cfg: AgentConfig) -> str | None:
    """Run the action; return the observation, or None if the episode is over."""
    if action.kind == "submit":
        live.episode.turns.append(Turn(text, "submit", ""))
        return None
    if action.kind != "bash":
        hint = MALFORMED_HINT if action.kind == "malformed" else UNTERMINATED_HINT
        live.episode.turns.append(Turn(text, action.kind, hint))
        return hint
    left = float(live.task.config.agent.timeout_sec) - (time.perf_counter() - live.started)
    result = live.sandbox.exec(action.command, timeout_s=max(0.1, min(cfg.command_timeout_s, left)))
    obs = format_observation(result, cfg.observation_budget)
    live.episode.turns.append(Turn(action.command, "bash", obs, result))
    live.episode.timings["exec_s"] = live.episode.timings.get("exec_s", 0.0) + result.duration_s
    if time.perf_counter() - live.started >= float(live.task.config.agent.timeout_sec):
        live.episode.status = "agent_timeout"
        return None
    return obs


def _turn(lives: list[_Live], engine: Engine, framer: ChatFramer, params: SamplingParams,
          cfg: AgentConfig, pool: ThreadPoolExecutor) -> None:
    for live in lives:
        if len(live.episode.tokens) + cfg.max_reply_tokens > cfg.max_context:
            live.episode.status, live.done = "context_overflow", True
    lives = [lv for lv in lives if not lv.done]
    if not lives:
        return
    t0 = time.perf_counter()
    comps = engine.generate([lv.episode.tokens for lv in lives], params)
    share = (time.perf_counter() - t0) / len(lives)
    replies = [_take_reply(lv, c, framer) for lv, c in zip(lives, comps)]
    observations = list(pool.map(lambda a: _act(a[0], *a[1], cfg), zip(lives, replies)))
    for live, obs in zip(lives, observations):
        live.episode.timings["generate_s"] = live.episode.timings.get("generate_s", 0.0) + share
        if obs is None:
            live.done = True
        else:
            live.episode.append(framer.observation(obs), sampled=False)


def _finish(live: _Live) -> None:
    ep = live.episode
    try:
        if live.sandbox is None:
            return
        t0 = time.perf_counter()
        verdict = verify(live.task, live.sandbox)
        ep.timings["verify_s"] = time.perf_counter() - t0
        ep.reward, ep.reward_details = verdict.reward, verdict.details
        if verdict.status != "ok":
            ep.status, ep.error = verdict.status, verdict.error
    except Exception as e:
        ep.status, ep.error, ep.reward = "infra_error", str(e), 0.0
    finally:
        if live.sandbox is not None:
            live.sandbox.close()


def run_episodes(jobs: list[tuple[Task, int]], engine: Engine, framer: ChatFramer,
                 params: SamplingParams, cfg: AgentConfig) -> list[Episode]:
    """Run one episode per (task, group_id); returns them in the same order."""
    lives = [_Live(task, Episode(task.id, gid)) for task, gid in jobs]
    base_seed = params.seed
    with ThreadPoolExecutor(cfg.workers) as pool:
        list(pool.map(lambda lv: _start(lv, framer, cfg.sandbox_backend), lives))
        try:
            for turn in range(cfg.max_turns):
                seed = None if base_seed is None else base_seed * 1000 + turn
                turn_params = replace(params, max_tokens=cfg.max_reply_tokens, seed=seed,
                                      stop_token_ids=[framer.end_id])
                _turn([lv for lv in lives if not lv.done], engine, framer, turn_params, cfg, pool)
        finally:
            list(pool.map(_finish, lives))
    return [lv.episode for lv in lives]
