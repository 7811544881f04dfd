"""What a harness is: how a model acts in an episode.

A harness gives the prompt (the task's instruction framed with what the model may do), parses
each reply into actions, runs an action in the sandbox, and writes an oracle step as the reply
the model should produce (for demonstrations). Token-in/token-out: the framer turns text into
ids, each piece on its own, and the loop keeps the sampled ids as sampled.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from posttrain.agent.protocol import Action
from posttrain.sandbox import Sandbox
from posttrain.types import ExecResult


class Harness(ABC):
    name: str
    observation_role: str = "user"       # the chat role the template gives observations

    @abstractmethod
    def prompt(self, framer, instruction: str) -> list[int]:
        """The ids of the episode's first prompt (also what a context policy rebuilds)."""

    @abstractmethod
    def parse(self, text: str, terminated: bool) -> list[Action]:
        """The reply's actions (at least one): runnable ones, submit, or failures with a hint."""

    @abstractmethod
    def run(self, action: Action, sandbox: Sandbox, timeout_s: float) -> ExecResult:
        """Run a runnable action (kind bash or tool) in the sandbox."""

    @abstractmethod
    def render(self, step: str | dict | None) -> str:
        """An oracle step as the model should write it; None: the submitting reply."""

    def observation(self, framer, text: str) -> list[int]:
        return framer.observation(text, role=self.observation_role)
