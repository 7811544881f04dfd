"""A built-in single-turn task: copy a short phrase. Its reward is the character-level
similarity of the reply to the phrase, in [0, 1], so groups rarely tie and learning shows
early. The same prompts and reward function drive the TRL comparison in bench/rl.py.
"""

from __future__ import annotations

import difflib
import random
from typing import Callable

from posttrain.agent.framing import embedded_user_turn
from posttrain.rollout.envs import Prompt
from posttrain.tasks.suites.terminal_basics import WORDS


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


def similarity_reward(text: str, prompt: Prompt) -> float:
    """difflib ratio between the reply (stripped) and the target phrase."""
    return difflib.SequenceMatcher(None, text.strip(), prompt.target).ratio()


REWARDS = {"similarity": similarity_reward}
