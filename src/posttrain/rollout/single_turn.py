"""Single-turn prompts and their reward functions.

copy: a built-in task, copy a short phrase. Its reward is the character-level similarity of
the reply to the phrase, in [0, 1], so groups rarely tie and learning shows early. The same
prompts and reward function drive the TRL comparison in bench/rl.py.

reply: the tasks of a single-turn suite (e.g. `posttrain tasks generate DIR --suite instruct`)
as prompts; the reward is the suite's scorer on the reply (instruct: the fraction of
constraints met). Each prompt's target is its task's metadata as JSON, so the reward needs
nothing but the prompt.
"""

from __future__ import annotations

import difflib
import json
import random
from typing import Callable

from posttrain.agent.framing import embedded_user_turn
from posttrain.rollout.envs import Prompt
from posttrain.tasks import Task
from posttrain.tasks.suites import score_reply
from posttrain.tasks.suites.terminal_basics import WORDS
from posttrain.types import Reward


def copy_prompts(n: int, seed: int, words: int = 2,
                 frame: Callable[[str], str] = embedded_user_turn) -> list[Prompt]:
    """n prompts `copy: PHRASE`, framed as one user turn by frame (agent.framing.single_turn
    gives a checkpoint's own)."""
    rng = random.Random(f"copy/{seed}")
    out = []
    for i in range(n):
        phrase = " ".join(rng.sample(WORDS, words))
        out.append(Prompt(f"copy-{i:04d}", frame(f"copy: {phrase}"), phrase))
    return out


def similarity_reward(text: str, prompt: Prompt) -> Reward:
    """difflib ratio between the reply (stripped) and the target phrase."""
    return Reward(difflib.SequenceMatcher(None, text.strip(), prompt.target).ratio())


def task_prompts(tasks: list[Task], frame: Callable[[str], str] = embedded_user_turn) -> list[Prompt]:
    """One prompt per single-turn task (read with tasks.load_tasks): its instruction framed as
    one user turn; the target holds the task's metadata for the reward."""
    multi = [t.id for t in tasks if not t.single_turn]
    if multi:
        raise ValueError(f"not single-turn tasks (metadata.kind): {', '.join(multi[:3])}")
    return [Prompt(t.id, frame(t.instruction.strip()), json.dumps(t.config.metadata)) for t in tasks]


def reply_score(text: str, prompt: Prompt) -> Reward:
    """The reward of a reply to a task prompt, with details: strict and each constraint met."""
    return Reward(*score_reply(json.loads(prompt.target), text))


def reply_reward(text: str, prompt: Prompt) -> Reward:
    """The suite's reward for a reply (instruct: the fraction of constraints met), no details."""
    return Reward(reply_score(text, prompt).value)


REWARDS = {"similarity": similarity_reward, "reply": reply_reward}
