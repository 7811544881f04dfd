"""The text protocol as a harness: `<bash>COMMAND</bash>` or `<submit/>` (agent/protocol.py)."""

from __future__ import annotations

from posttrain.agent.harness.base import Harness
from posttrain.agent.protocol import Action, parse_action, render_action
from posttrain.errors import TaskError
from posttrain.sandbox import Sandbox
from posttrain.types import ExecResult


class TextHarness(Harness):
    name = "text"

    def prompt(self, framer, instruction: str) -> list[int]:
        return framer.prompt(instruction)

    def parse(self, text: str, terminated: bool) -> list[Action]:
        return [parse_action(text, terminated)]

    def run(self, action: Action, sandbox: Sandbox, timeout_s: float) -> ExecResult:
        return sandbox.exec(action.command, timeout_s=timeout_s)

    def render(self, step: str | dict | None) -> str:
        if isinstance(step, dict):
            raise TaskError("a tool-call oracle step needs the tools harness (agent.harness)")
        return render_action(Action("submit") if step is None else Action("bash", step))
