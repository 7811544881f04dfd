"""Demonstrations for SFT: a task's oracle turns (solution/steps.json) played through
the real sandbox, so each observation is what the agent would really see."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from posttrain.agent.chat import ChatFramer
from posttrain.agent.config import AgentConfig
from posttrain.agent.protocol import Action, format_observation, render_action
from posttrain.agent.trial import Verdict, open_task_sandbox, verify
from posttrain.tasks import Task
from posttrain.types import Episode


@dataclass
class Transcript:
    task_id: str
    instruction: str
    replies: list[str]          # reply texts, the last one is <submit/>
    observations: list[str]     # one per reply except the last
    reward: float
    failure: str = ""           # why the reward is below 1: for the error a user sees


def play_oracle(task: Task, cfg: AgentConfig) -> Transcript:
    """Run the task's oracle steps as agent turns and verify the result."""
    steps = task.oracle_steps()
    if steps is None:
        raise ValueError(f"{task.id}: no solution/steps.json to build a demonstration from")
    replies, observations = [], []
    with open_task_sandbox(task, cfg.sandbox_backend) as sandbox:
        for command in steps:
            result = sandbox.exec(command, timeout_s=cfg.command_timeout_s)
            replies.append(render_action(Action("bash", command)))
            observations.append(format_observation(result, cfg.observation_budget))
        replies.append(render_action(Action("submit")))
        verdict = verify(task, sandbox)
    failure = "" if verdict.reward >= 1 else _failure(verdict, observations)
    return Transcript(task.id, task.instruction, replies, observations, verdict.reward, failure)


def _failure(verdict: Verdict, observations: list[str]) -> str:
    why = verdict.error if verdict.status != "ok" else f"reward {verdict.reward:g}"
    last = observations[-1] if observations else "(no steps)"
    return f"{why}; the last step's output: {last[:300]!r}"


def play_oracles(tasks: list[Task], cfg: AgentConfig) -> list[Transcript]:
    with ThreadPoolExecutor(cfg.workers) as pool:
        return list(pool.map(lambda t: play_oracle(t, cfg), tasks))


def transcript_texts(t: Transcript) -> list[str]:
    """Every piece of text in a transcript (to train a tokenizer on)."""
    return [t.instruction, *t.replies, *t.observations]


def demo_episode(t: Transcript, framer: ChatFramer) -> Episode:
    """The transcript as a token stream, reply tokens masked in for the SFT loss."""
    ep = Episode(t.task_id, group_id=0, reward=t.reward)
    ep.append(framer.prompt(t.instruction), sampled=False)
    ep.prompt_len = len(ep.tokens)
    for i, reply in enumerate(t.replies):
        ids = framer.reply(reply)
        ep.append(ids, sampled=True, logprobs=[0.0] * len(ids))
        if i < len(t.observations):
            ep.append(framer.observation(t.observations[i]), sampled=False)
    return ep
