"""The multi-turn episode loop, run in lockstep over a batch of episodes.

Each turn: each episode's context policy may rewrite its prompt (agent/context.py), one
batched engine.generate over every live episode, parse each reply, run its actions in their
sandboxes concurrently (agent/act.py), append the observations. Engine and sandbox faults are
retried (agent/retry.py); one that outlives its retries ends the episode as infra_error.
An episode ends on <submit/>, the turn limit, the task's agent timeout or the
context limit; then its tests run and give the reward. Every model call, command and
verifier run is timed as a Step (agent/traces.py exports them as spans). With a store, each
episode is checkpointed after every turn and resumed from there (agent/checkpoint.py). With a Gate
(agent/approval.py), a command its policy matches waits for a reviewer first; a denied one is
an observation, and the wait is an approval Step that does not count against the agent timeout.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Callable

from posttrain.agent.act import act
from posttrain.agent.approval import NO_APPROVER, Gate
from posttrain.agent.chat import ChatFramer
from posttrain.agent.checkpoint import EpisodeStore
from posttrain.agent.config import AgentConfig
from posttrain.agent.context import History, context_policy
from posttrain.agent.harness import harness_for
from posttrain.agent.live import Live, fail, finish, retried
from posttrain.agent.retry import EpisodeFault
from posttrain.agent.trial import open_task_sandbox
from posttrain.engine.base import Engine, SamplingParams
from posttrain.errors import ConfigError
from posttrain.tasks import Task
from posttrain.types import Completion, Episode, Step


def _start(live: Live, framer: ChatFramer, cfg: AgentConfig, store: EpisodeStore | None,
           version: int) -> None:
    t0 = time.perf_counter()
    try:   # not retried: a broken environment fails the same way again (eval reruns the trial)
        live.harness = harness_for(live.task, cfg.harness, framer)
        live.episode.append(live.harness.prompt(framer, live.task.instruction), sampled=False)
        live.episode.prompt_len = len(live.episode.tokens)
        live.sandbox = open_task_sandbox(live.task, cfg.sandbox_backend)
    except Exception as e:  # a broken environment is an infra error, not a model failure
        fail(live, e)
    live.started = time.perf_counter()
    live.episode.timings["sandbox_start_s"] = live.started - t0
    if store is not None and live.sandbox is not None and (saved := store.load(live.key)):
        _resume(live, store, *saved, version)


def _resume(live: Live, store: EpisodeStore, state: dict, snapshot, version: int) -> None:
    """Continue at the checkpoint's turn: its episode, its turns' ids, its files, its clock.
    One sampled under other weights than the engine's now starts again (it could not continue
    as it would have), and says so in its timings."""
    if state.get("version", version) != version:
        store.drop(live.key)
        live.episode.timings["resume_refused_version"] = float(state["version"])
        return
    t0 = time.time()
    store.restore(snapshot, live.sandbox)
    live.episode = Episode.from_dict(state["episode"])
    live.turn_ids, live.first_turn = state["turn_ids"], state["turn"]
    live.started -= state["elapsed_s"]
    live.episode.steps.append(Step("restore", state["turn"], t0, time.time() - t0))


def _save(live: Live, store: EpisodeStore, next_turn: int, version: int) -> None:
    """Checkpoint the episode; the snapshot's own timing is a Step of the next checkpoint."""
    t0 = time.time()
    state = {"episode": live.episode.to_dict(), "turn_ids": live.turn_ids, "turn": next_turn,
             "elapsed_s": time.perf_counter() - live.started, "version": version}
    kept = store.save(live.key, state, live.sandbox)
    live.episode.steps.append(Step("snapshot", next_turn, t0, time.time() - t0, {"kept": kept}))


def _take_reply(live: Live, comp: Completion, framer: ChatFramer):
    ep = live.episode
    live.reply_start = len(ep.tokens)
    ep.append_completion(comp)
    text, terminated = framer.decode_reply(comp.token_ids)
    if not terminated:  # close the turn so the next observation is well framed
        ep.append([framer.end_id], sampled=False)
    return text, live.harness.parse(text, terminated)



def _rewrite(live: Live, engine: Engine, framer: ChatFramer, cfg: AgentConfig) -> None:
    """Let the episode's context policy replace its prompt (a new segment) before the call."""
    history = History(live.task.instruction, live.turn_ids,
                      frame=lambda text: live.harness.prompt(framer, text))
    try:
        prompt = retried(lambda: live.policy.prompt(history, framer, engine), "engine", [live], cfg)
    except EpisodeFault as e:
        fail(live, e)
        return
    if prompt is not None and prompt != live.episode.tokens:
        live.episode.restart(prompt)


def _generate(lives: list[Live], engine: Engine, params: SamplingParams, cfg: AgentConfig,
              own_streams: bool):
    """One batched call, timed as a model Step of each episode; None if the engine failed.
    own_streams: each episode samples on its own stream, not its row's (needed to resume)."""
    t0 = time.time()
    if own_streams:
        params = replace(params, seed_rows=[lv.stream for lv in lives])
    try:
        comps = retried(lambda: engine.generate([lv.episode.tokens for lv in lives], params),
                         "engine", lives, cfg)
    except EpisodeFault as e:
        for live in lives:
            fail(live, e)
        return None
    took = time.time() - t0
    for live, comp in zip(lives, comps):
        ep = live.episode
        ep.timings["generate_s"] = ep.timings.get("generate_s", 0.0) + took / len(lives)
        ep.steps.append(Step("model", len(ep.turns), t0, took, {
            "tokens_in": len(ep.tokens), "tokens_out": len(comp.token_ids), "batch": len(lives),
            "finish_reason": comp.finish_reason}))
    return comps


def _turn(lives: list[Live], engine: Engine, framer: ChatFramer, params: SamplingParams,
          cfg: AgentConfig, pool: ThreadPoolExecutor, own_streams: bool, gate: Gate | None) -> None:
    for live in lives:
        _rewrite(live, engine, framer, cfg)
        if not live.done and len(live.episode.tokens) + cfg.max_reply_tokens > cfg.max_context:
            live.episode.status, live.done = "context_overflow", True
    lives = [lv for lv in lives if not lv.done]
    if not lives or (comps := _generate(lives, engine, params, cfg, own_streams)) is None:
        return
    replies = [_take_reply(lv, c, framer) for lv, c in zip(lives, comps)]
    observations = list(pool.map(lambda a: act(a[0], *a[1], cfg, gate), zip(lives, replies)))
    for live, obs in zip(lives, observations):
        if obs is None:
            live.done = True
        else:
            live.episode.append(live.harness.observation(framer, obs), sampled=False)
            live.turn_ids.append(live.episode.tokens[live.reply_start:])


class _Told:
    """Tells `report` how many more of `lives` are done since it last told (a progress hook)."""

    def __init__(self, report: Callable[[int], None] | None, lives: list[Live]):
        self.report, self.lives, self.told = report, lives, 0

    def tick(self) -> None:
        if self.report is not None:
            done = sum(lv.done for lv in self.lives)
            self.report(done - self.told)
            self.told = done

    def rest(self) -> None:            # the episodes the turn limit ended
        if self.report is not None:
            self.report(len(self.lives) - self.told)


def run_episodes(jobs: list[tuple[Task, int]], engine: Engine, framer: ChatFramer,
                 params: SamplingParams, cfg: AgentConfig, contexts: list | None = None,
                 tracer=None, store: EpisodeStore | None = None,
                 gate: Gate | None = None, keep_finished: bool = False,
                 progress: Callable[[int], None] | None = None) -> list[Episode]:
    """Run one episode per (task, group_id); returns them in the same order. `contexts`: a
    ContextConfig per job (None: cfg.context for all); `tracer`: agent/traces.py's, or None;
    `store`: checkpoint each episode after every turn, and resume those it holds; each episode
    then samples on its own stream, so a resumed one draws what it would have drawn;
    `gate`: the commands that wait for a reviewer (agent/approval.py; needed if cfg.approval.on);
    `keep_finished`: leave a finished episode's last checkpoint for the caller to drop once it
    has written the result (a kill in between then redoes one turn, not the whole episode);
    `progress`: after each turn, told how many episodes finished in it (the turn limit's at the end)."""
    if gate is None and cfg.approval.on:
        raise ConfigError(NO_APPROVER)
    contexts = contexts or [cfg.context] * len(jobs)
    seen: Counter = Counter()
    lives = []
    for (task, gid), c in zip(jobs, contexts):
        lives.append(Live(task, Episode(task.id, gid), context_policy(c), slot=seen[task.id, gid]))
        seen[task.id, gid] += 1
    base_seed, told = params.seed, _Told(progress, lives)
    with ThreadPoolExecutor(cfg.workers) as pool:
        version = engine.policy_version     # a checkpoint saved under other weights is not resumed
        list(pool.map(lambda lv: _start(lv, framer, cfg, store, version), lives))
        try:
            for turn in range(cfg.max_turns):
                seed = None if base_seed is None else base_seed * 1000 + turn
                turn_params = replace(params, max_tokens=cfg.max_reply_tokens, seed=seed,
                                      stop_token_ids=[framer.end_id])
                now = [lv for lv in lives if not lv.done and lv.first_turn <= turn]
                _turn(now, engine, framer, turn_params, cfg, pool, store is not None, gate)
                told.tick()
                if store is not None:
                    alive = [lv for lv in now if not lv.done]
                    list(pool.map(lambda lv: _save(lv, store, turn + 1, engine.policy_version), alive))
        except BaseException:   # Ctrl-C: an open question would keep the pool from closing
            if gate is not None:    # (pool.map has cancelled the calls not started)
                gate.approver.cancel()
            raise
        finally:
            list(pool.map(lambda lv: finish(lv, store, keep_finished), lives))
    told.rest()
    if tracer is not None:
        for live in lives:
            tracer.export(live.episode)
    return [lv.episode for lv in lives]
