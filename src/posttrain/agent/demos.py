"""Demonstrations for SFT: a task's oracle turns (solution/steps.json) played through
the real sandbox, so each observation is what the agent would really see."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from posttrain.agent.chat import ChatFramer
from posttrain.agent.config import AgentConfig
from posttrain.agent.harness import harness_for
from posttrain.agent.harness.text import TextHarness
from posttrain.agent.protocol import format_observation
from posttrain.agent.trial import Verdict, open_task_sandbox, verify
from posttrain.tasks import Task
from posttrain.types import Episode

RUNNABLE = ("bash", "tool")


@dataclass
class Transcript:
    task_id: str
    instruction: str
    replies: list[str]          # reply texts, the last one submits
    observations: list[str]     # one per reply except the last
    reward: float
    failure: str = ""           # why the reward is below 1: for the error a user sees
    task: Task | None = None    # to frame it again under another framer's harness
    steps: list = field(default_factory=list)   # the oracle steps the replies write


def play_oracle(task: Task, cfg: AgentConfig) -> Transcript:
    """Run the task's oracle steps as agent turns, parsed and run by the episode's harness
    (as the model's replies would be), and verify the result."""
    steps = task.oracle_steps()
    if steps is None:
        raise ValueError(f"{task.id}: no solution/steps.json to build a demonstration from")
    harness = harness_for(task, cfg.harness, framer=None)
    replies, observations = [], []
    with open_task_sandbox(task, cfg.sandbox_backend) as sandbox:
        for step in steps:
            replies.append(harness.render(step))
            outputs = [harness.run(a, sandbox, cfg.command_timeout_s) if a.kind in RUNNABLE
                       else a.hint for a in harness.parse(replies[-1], True)]
            observations.append("\n".join(o if isinstance(o, str) else
                                          format_observation(o, cfg.observation_budget)
                                          for o in outputs))
        replies.append(harness.render(None))
        verdict = verify(task, sandbox)
    failure = "" if verdict.reward >= 1 else _failure(verdict, observations)
    return Transcript(task.id, task.instruction, replies, observations, verdict.reward, failure,
                      task, list(steps))


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


def demo_episode(t: Transcript, framer: ChatFramer, harness: str = "auto") -> Episode:
    """The transcript as a token stream, reply tokens masked in for the SFT loss, framed as
    an episode under `framer` would be (its harness writes the replies in its own form)."""
    h = harness_for(t.task, harness, framer) if t.task is not None else TextHarness()
    replies = [h.render(s) for s in t.steps] + [h.render(None)] if t.task else t.replies
    ep = Episode(t.task_id, group_id=0, reward=t.reward)
    ep.append(h.prompt(framer, t.instruction), sampled=False)
    ep.prompt_len = len(ep.tokens)
    for i, reply in enumerate(replies):
        ids = framer.reply(reply)
        ep.append(ids, sampled=True, logprobs=[0.0] * len(ids))
        if i < len(t.observations):
            ep.append(h.observation(framer, t.observations[i]), sampled=False)
    return ep
