"""Environments that turn group assignments into episodes.

SandboxEnv: multi-turn agent episodes over Harbor tasks in the real sandbox (agent/episodes.py:
the built-in loop, or the agent program agent.program names), with a per-episode time cap, each
domain's context policy and,
with agent.otel set, a trace per episode, and with `checkpoints` a checkpoint of each episode
after every turn (agent/checkpoint.py). SingleTurnEnv: one reply per
prompt scored by a Python reward function (the setting TRL's GRPOTrainer covers).
InEngineProcess: an env whose episodes run wholly in the engine's child process.
Each is an `Environment`, which declares what callers would otherwise probe its class for.
A reward function that raises, or a prompt that does not fit the context, becomes a
recorded episode status; the run goes on.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path

from posttrain.agent.chat import ChatFramer
from posttrain.agent.checkpoint import EpisodeStore
from posttrain.agent.config import AgentConfig, ContextConfig
from posttrain.agent.episodes import run_agent_episodes
from posttrain.engine.base import Engine, SamplingParams
from posttrain.rollout.length import LengthStage, budgets_at
from posttrain.schedule.sampler import GroupJob
from posttrain.tasks import Task
from posttrain.tasks.tools import task_tools
from posttrain.types import Episode, Reward


def capped(task: Task, timeout_s: float | None) -> Task:
    """The task with its agent timeout lowered to the per-episode cap (if smaller)."""
    if timeout_s is None or task.config.agent.timeout_sec <= timeout_s:
        return task
    agent = task.config.agent.model_copy(update={"timeout_sec": timeout_s})
    return dataclasses.replace(task, config=task.config.model_copy(update={"agent": agent}))


class Environment(abc.ABC):
    """What every environment offers: its task ids, a wave of groups run on an engine, and
    four declarations that callers read instead of asking which class it is."""

    # Its waves only wait on an engine process: the Pipeline pins their worker to its cores.
    waits_on_engine: bool = False
    # Scored by a judge model (rollout/judge.py): its reward_fn is a JudgeReward, whose
    # metrics each training step logs.
    judged: bool = False
    # Its held-out score (recipes/rl/run.py): "pass@1" of sandbox episodes, or the mean "reward".
    held_out: str = "reward"
    # Its tasks declare tools (tools.json): a run that makes no tool call stops early.
    uses_tools: bool = False
    task_ids: list[str]

    @abc.abstractmethod
    def run(self, jobs: list[GroupJob], engine: Engine) -> list[list[Episode]]:
        """One list of group_size episodes per job (episodes that failed carry their status)."""


@dataclasses.dataclass
class SandboxEnv(Environment):
    tasks: list[Task]
    framer: ChatFramer
    agent: AgentConfig
    group_size: int
    temperature: float = 1.0
    episode_timeout_s: float | None = None
    contexts: dict[str, ContextConfig] = dataclasses.field(default_factory=dict)  # by domain
    checkpoints: Path | None = None    # episode checkpoints' root; a rerun group resumes there
    lengths: list[LengthStage] = dataclasses.field(default_factory=list)   # rollout/length.py
    _tracer: object = dataclasses.field(default=None, init=False, repr=False)
    held_out = "pass@1"

    @property
    def task_ids(self) -> list[str]:
        return [t.id for t in self.tasks]

    @property
    def uses_tools(self) -> bool:
        return any(task_tools(t) is not None for t in self.tasks)

    def __getstate__(self) -> dict:
        return self.__dict__ | {"_tracer": None}   # an exporter thread does not travel (Ray)

    def tracer(self):
        if self._tracer is None and self.agent.otel is not None:
            from posttrain.agent.traces import EpisodeTracer

            self._tracer = EpisodeTracer(self.agent.otel)
        return self._tracer

    def run(self, jobs: list[GroupJob], engine: Engine) -> list[list[Episode]]:
        """All groups of the wave in lockstep; returns one list of G episodes per job."""
        runs = [(capped(self.tasks[j.task_index], self.episode_timeout_s), j.uid)
                for j in jobs for _ in range(self.group_size)]
        contexts = [self.contexts.get(j.domain, self.agent.context)
                    for j in jobs for _ in range(self.group_size)]
        params = SamplingParams(temperature=self.temperature, seed=jobs[0].seed)
        store = EpisodeStore(self.checkpoints) if self.checkpoints is not None else None
        agent = self._agent_at(engine.policy_version)
        episodes = run_agent_episodes(runs, engine, self.framer, params, agent, contexts, self.tracer(),
                                      store)
        g = self.group_size
        return [episodes[i * g:(i + 1) * g] for i in range(len(jobs))]

    def _agent_at(self, version: int) -> AgentConfig:
        """The agent config with the length curriculum's budgets at policy version `version`."""
        reply, context = budgets_at(self.lengths, version, self.agent.max_reply_tokens, self.agent.max_context)
        if (reply, context) == (self.agent.max_reply_tokens, self.agent.max_context):
            return self.agent
        return self.agent.model_copy(update={"max_reply_tokens": reply, "max_context": context})


@dataclasses.dataclass
class Prompt:
    id: str
    text: str
    target: str


# The reward of a reply, with details such as rollout.single_turn.reply_score's strict and met:FAMILY.
RewardFn = Callable[[str, Prompt], Reward]


@dataclasses.dataclass
class SingleTurnEnv(Environment):
    prompts: list[Prompt]
    tokenizer: object
    reward_fn: RewardFn
    group_size: int
    max_tokens: int = 16
    max_context: int = 2048
    temperature: float = 1.0
    stop_token_ids: list[int] = dataclasses.field(default_factory=list)
    chunk_tokens: int | None = None  # sample replies this many tokens per generate call
    lengths: list[LengthStage] = dataclasses.field(default_factory=list)   # rollout/length.py
    # reward_fn is a judge (rollout/judge.py JudgeReward): one score_batch call per wave
    judged: bool = False

    @property
    def task_ids(self) -> list[str]:
        return [p.id for p in self.prompts]

    def run(self, jobs: list[GroupJob], engine: Engine) -> list[list[Episode]]:
        if self.lengths:    # this wave's budgets, from the length curriculum
            reply, context = budgets_at(self.lengths, engine.policy_version, self.max_tokens, self.max_context)
            return dataclasses.replace(self, lengths=[], max_tokens=reply, max_context=context).run(jobs, engine)
        prompts = [self.prompts[j.task_index] for j in jobs]
        ids = [self.tokenizer.encode(p.text, add_special_tokens=False) for p in prompts]
        fits = [len(x) + self.max_tokens <= self.max_context for x in ids]
        out = []
        for job, prompt, x, ok in zip(jobs, prompts, ids, fits):
            group = []
            for _ in range(self.group_size):
                ep = Episode(prompt.id, job.uid)
                ep.append(x, sampled=False)
                ep.prompt_len = len(x)
                if not ok:
                    ep.status, ep.error = "context_overflow", "prompt + max_tokens exceed the context"
                group.append(ep)
            out.append(group)
        live = [(ep, p) for group, p, ok in zip(out, prompts, fits) if ok for ep in group]
        self._generate([ep for ep, _ in live], engine, jobs[0].seed)
        if self.judged:
            self._judge(live)
        else:
            for ep, p in live:
                self._record(ep, self._call_reward(self._reply(ep), p))
        return out

    def _generate(self, episodes: list[Episode], engine: Engine, seed: int) -> None:
        """Sample replies, chunk_tokens at a time when set: each chunk is its own generate
        call, so a weight update can land mid-reply and the tokens after it carry the new
        version (a partial rollout)."""
        chunk = self.chunk_tokens or self.max_tokens
        live, i = list(episodes), 0
        while live:
            room = [min(chunk, self.max_tokens - e.tokens_out) for e in live]
            params = SamplingParams(temperature=self.temperature, max_tokens=min(room),
                                    seed=seed * 1000 + i, stop_token_ids=list(self.stop_token_ids))
            for ep, comp in zip(live, engine.generate([e.tokens for e in live], params)):
                ep.append_completion(comp)
            live = [e for e in live if e.tokens_out < self.max_tokens
                    and e.tokens[-1] not in self.stop_token_ids]
            i += 1

    def _reply(self, ep: Episode) -> str:
        body = [t for t, m in zip(ep.tokens, ep.loss_mask) if m and t not in self.stop_token_ids]
        return self.tokenizer.decode(body, skip_special_tokens=True)

    def _call_reward(self, text: str, prompt: Prompt):
        try:
            return self.reward_fn(text, prompt)
        except Exception as e:  # a broken reward function is recorded, the run goes on
            return e

    def _judge(self, live: list) -> None:
        t0 = time.perf_counter()
        results = self.reward_fn.score_batch([(self._reply(ep), p) for ep, p in live])
        took = time.perf_counter() - t0
        for (ep, _), out in zip(live, results):
            ep.timings["judge_s"] = took        # each episode waited for the wave's judge call
            self._record(ep, out)

    @staticmethod
    def _record(ep: Episode, out) -> None:
        """Set the reward from the reward function's Reward; the exception it raised or a
        non-finite reward makes the episode a verifier_error (recorded, never trained)."""
        try:
            if isinstance(out, Exception):   # what _call_reward caught or the judge gave
                raise out
            reward = float(out.value)
            if not math.isfinite(reward):
                raise ValueError(f"reward is {reward}")
            ep.reward, ep.reward_details = reward, dict(out.details)
        except Exception as e:
            ep.status, ep.error = "verifier_error", f"reward function raised {type(e).__name__}: {e}"


class InEngineProcess(Environment):
    """`env`'s episodes run wholly in the engine's child process (engine/process.py):
    prompts tokenized, replies sampled, decoded and scored there, so the trainer's process
    only receives finished episodes and its interpreter is left to training. For envs whose
    episodes are CPU work besides generation (SingleTurnEnv); episodes that wait on sandboxes
    would queue behind each other in the one child."""

    # A rollout thread over this env mostly waits for the child, then unpickles its episodes
    # while the child idles: it belongs on the child's core (Pipeline pins it there).
    waits_on_engine = True

    def __init__(self, env: Environment, engine):
        self.env, self.judged, self.held_out = env, env.judged, env.held_out
        self._handle = engine.bind(env.run)

    @property
    def task_ids(self) -> list[str]:
        return self.env.task_ids

    def run(self, jobs: list[GroupJob], engine) -> list[list[Episode]]:
        return engine.run_beside(self._handle, jobs)
