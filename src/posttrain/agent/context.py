"""Context policies: what of an episode's history goes back into the prompt, per domain.

keep_all   the whole transcript (observations clipped to agent.observation_budget).
last_k     the instruction (with a note of how many turns were left out) and the last k turns.
truncate   the whole transcript; each observation longer than max_chars keeps its head and its
           last tail_chars, with a marker where the middle was cut.
summarise  the instruction with a model's summary of all but the last k turns, then those k.

Token-in/token-out holds under every policy: a new prompt is built from ids already in the
stream (the kept turns, as sampled and as tokenised when observed) and new text tokenised
alone (the instruction with its note or summary). When a policy rewrites the prompt, the
episode closes its stream as a segment and starts another (Episode.restart), so what the
engine saw is exactly what is trained on (train/batch.py: by_segment).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from posttrain.agent.config import ContextConfig
from posttrain.agent.framing import single_turn
from posttrain.agent.protocol import format_observation
from posttrain.engine.base import Engine, SamplingParams
from posttrain.types import ExecResult

SUMMARY_REQUEST = ("Summarise what these steps of a terminal session did and found, "
                   "in one or two sentences:\n\n{steps}")


@dataclass
class History:
    """What a policy reads: the task's instruction and each finished turn's ids (the reply as
    sampled, then its observation), exactly as they are in the episode's stream."""

    instruction: str
    turns: list[list[int]]
    frame: Callable[[str], list[int]] | None = None   # an instruction's prompt ids (the harness's)

    def prompt(self, framer, instruction: str) -> list[int]:
        return self.frame(instruction) if self.frame else framer.prompt(instruction)


def _flat(turns: list[list[int]]) -> list[int]:
    return [t for ids in turns for t in ids]


class KeepAll:
    def __init__(self, cfg: ContextConfig):
        self.cfg = cfg

    def observation(self, result: ExecResult, budget: int) -> str:
        return format_observation(result, budget)

    def prompt(self, history: History, framer, engine: Engine) -> list[int] | None:
        """A new prompt for the next model call, or None to go on appending to the stream."""
        return None


class LastK(KeepAll):
    def prompt(self, history: History, framer, engine: Engine) -> list[int] | None:
        dropped = len(history.turns) - self.cfg.k
        if dropped <= 0:
            return None
        note = f"{history.instruction.strip()}\n\n[{dropped} earlier turns left out]"
        return history.prompt(framer, note) + _flat(history.turns[-self.cfg.k:])


class Truncate(KeepAll):
    def observation(self, result: ExecResult, budget: int) -> str:
        return format_observation(result, self.cfg.max_chars, tail=self.cfg.tail_chars)


class Summarise(KeepAll):
    """Older turns summarised by the policy's own engine, or by the server at summary_engine
    (it must serve a model with the policy's tokenizer: token ids go in and out)."""

    def __init__(self, cfg: ContextConfig):
        super().__init__(cfg)
        self._engine: Engine | None = None

    def summariser(self, policy_engine: Engine) -> Engine:
        if self.cfg.summary_engine == "policy":
            return policy_engine
        if self._engine is None:
            from posttrain.engine.clients.openai import RemoteEngine

            self._engine = RemoteEngine(self.cfg.summary_engine)
        return self._engine

    def summary(self, turns: list[list[int]], framer, engine: Engine) -> str:
        tok = framer.tokenizer
        frame, end_id = single_turn(tok)
        steps = tok.decode(_flat(turns), skip_special_tokens=True)
        ids = tok.encode(frame(SUMMARY_REQUEST.format(steps=steps)), add_special_tokens=False)
        params = SamplingParams(temperature=0.0, max_tokens=self.cfg.summary_tokens,
                                stop_token_ids=[end_id])
        out = self.summariser(engine).generate([ids], params)[0].token_ids
        return tok.decode([t for t in out if t != end_id], skip_special_tokens=True).strip()

    def prompt(self, history: History, framer, engine: Engine) -> list[int] | None:
        older = len(history.turns) - self.cfg.k
        if older <= 0:
            return None
        summary = self.summary(history.turns[:older], framer, engine)
        text = f"{history.instruction.strip()}\n\n[summary of the first {older} turns: {summary}]"
        return history.prompt(framer, text) + _flat(history.turns[older:])


POLICIES = {"keep_all": KeepAll, "last_k": LastK, "truncate": Truncate, "summarise": Summarise}


def context_policy(cfg: ContextConfig) -> KeepAll:
    return POLICIES[cfg.kind](cfg)
