"""Intervention points: which commands wait for a reviewer before they run, and what they hear.

A policy (regex rules searched in the command, or any callable) picks the commands; a Gate
pairs it with an Approver (a person at the terminal, agent/approval_terminal.py, or a UI over
HTTP, agent/approval_http.py). The loop asks the gate before each bash command: an allowed one
runs, a denied one becomes the observation DENIED_PREFIX + reason and the episode goes on.
Off unless asked for (`agent.approval.on`); `posttrain rl` refuses it (nobody is there to answer).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from pydantic import Field, field_validator

from posttrain.config_base import StrictModel
from posttrain.errors import ConfigError

# Commands that destroy or fetch-and-run: the rules of `posttrain eval --approve` given none.
DEFAULT_RULES = (
    r"\brm\s+(-\S+\s+)*-\S*[rRf]",          # rm -r, rm -rf, rm -f
    r"\b(curl|wget)\b[^|;]*\|\s*(sudo\s+)?\w*sh\b",   # curl ... | sh
    r"\bdd\b.*\bof=/dev/",
    r"\bmkfs(\.\w+)?\b",
    r"\b(shutdown|reboot|poweroff|halt)\b",
    r"\bchmod\s+(-\S+\s+)*[0-7]*777\s+/",
    r":\(\)\s*\{.*\};\s*:",                  # the fork bomb
    r"\bgit\s+push\b.*(--force|\s-f\b)",
)
DENIED_PREFIX = "Action denied by the reviewer: "
NO_APPROVER = "agent.approval is on but no approver is attached (`posttrain eval --approve`)"


class ApprovalConfig(StrictModel):
    on: bool = False                        # off by default, and always in `posttrain rl`
    rules: list[str] = Field(default_factory=lambda: list(DEFAULT_RULES))  # re.search on the command

    @field_validator("rules")
    @classmethod
    def _compiles(cls, rules: list[str]) -> list[str]:
        if problem := bad_rule(rules):
            raise ValueError(problem)
        return rules


def bad_rule(rules: Sequence[str]) -> str | None:
    """Why the first rule that is not a regex is not one; None if all compile."""
    for rule in rules:
        try:
            re.compile(rule)
        except re.error as e:
            return f"approval rule {rule!r} is not a regex: {e}"
    return None


@dataclass(frozen=True)
class ApprovalRequest:
    """A command that waits for a verdict: whose episode, at which turn, and the rule it matched."""

    task_id: str
    group_id: int
    slot: int
    turn: int
    command: str
    rule: str

    def to_dict(self) -> dict:
        return {"task_id": self.task_id, "group_id": self.group_id, "slot": self.slot,
                "turn": self.turn, "command": self.command, "rule": self.rule}


@dataclass(frozen=True)
class Decision:
    allow: bool
    reason: str = ""
    by: str = ""            # who decided: "terminal", "http", "timeout", ...


class Approver(Protocol):
    def decide(self, request: ApprovalRequest) -> Decision:
        """Block until the request is allowed or denied (may be called from several threads)."""
        ...

    def cancel(self) -> None:
        """The run is ending (Ctrl-C, an error): deny the requests waiting now."""
        ...


class ApprovalPolicy:
    """Which commands need a verdict: the first regex rule found in it, or `match(command)`,
    a callable returning the reason it matched (a string) or None."""

    def __init__(self, rules: Sequence[str] = (), match: Callable[[str], str | None] | None = None):
        self.patterns = [re.compile(r) for r in rules]
        self.match = match

    def rule_for(self, command: str) -> str | None:
        for pattern in self.patterns:
            if pattern.search(command):
                return pattern.pattern
        return self.match(command) if self.match is not None else None

    def needs(self, command: str) -> bool:
        return self.rule_for(command) is not None


@dataclass(frozen=True)
class Gate:
    policy: ApprovalPolicy
    approver: Approver


def gate_for(cfg: ApprovalConfig, approver: Approver | None) -> Gate | None:
    """The gate of an agent config's approval table; None when it is off."""
    if not cfg.on:
        return None
    if approver is None:
        raise ConfigError(NO_APPROVER)
    return Gate(ApprovalPolicy(cfg.rules), approver)


def denied_observation(decision: Decision) -> str:
    return DENIED_PREFIX + (decision.reason or "no reason given")
