"""The tool-calling protocol as a harness: tools declared as JSON Schemas, calls in the model's
own chat format, results sent back as `tool` messages.

Where the checkpoint's chat template renders `tools` (Qwen2's), the tools go to the template and
the model answers in Hermes `<tool_call>{...}</tool_call>` blocks; where it does not (SmolLM2's,
the embedded tokenizer's), they are listed in the system prompt and the model answers in the
list form of SmolLM2's card. Either form is read back (agent/harness/calls.py). A task declares
its tools in tools.json (tasks/tools.py); one that declares none gets `bash`. `submit` ends the
episode.
"""

from __future__ import annotations

import json
import shlex

from posttrain.agent.harness.base import Harness
from posttrain.agent.harness.calls import parse_calls
from posttrain.agent.protocol import Action
from posttrain.sandbox import Sandbox
from posttrain.tasks.tools import ToolSet
from posttrain.toolcalls import write_call
from posttrain.types import ExecResult

SUBMIT = {"name": "submit", "description": "Declare the task complete and end the episode.",
          "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}
SYSTEM = "You are an agent. You act only by calling tools, and you read each result."
LISTED = ("You can call these tools:\n<tools>\n{tools}\n</tools>\nReply with one tool call and "
          "nothing else, in this form:\n<tool_call>[{{\"name\": \"TOOL\", \"arguments\": "
          "{{...}}}}]</tool_call>\nWhen the task is done, call submit.")


class ToolHarness(Harness):
    name = "tools"
    observation_role = "tool"

    def __init__(self, tools: ToolSet, native: bool):
        """native: the chat template renders the tools itself (and the Hermes object form)."""
        self.tools, self.native = tools, native
        self.specs = {s["name"]: s for s in (*tools.specs, SUBMIT)}

    def system_prompt(self) -> str:
        if self.native:
            return SYSTEM
        listed = "\n".join(json.dumps(s) for s in self.specs.values())
        return f"{SYSTEM}\n{LISTED.format(tools=listed)}"

    def prompt(self, framer, instruction: str) -> list[int]:
        tools = [{"type": "function", "function": s} for s in self.specs.values()]
        return framer.prompt(instruction, system=self.system_prompt(),
                             tools=tools if self.native else None)

    def parse(self, text: str, terminated: bool) -> list[Action]:
        actions = parse_calls(text, self.specs)
        if not terminated and not any(a.kind in ("tool", "submit") for a in actions):
            return [Action("unterminated", hint="error: reply was cut off; keep calls short")]
        return actions

    def run(self, action: Action, sandbox: Sandbox, timeout_s: float) -> ExecResult:
        if not self.tools.command:                      # the built-in bash tool
            return sandbox.exec(action.args["command"], timeout_s=timeout_s)
        return sandbox.exec(f"{self.tools.command} {shlex.quote(action.name)}",
                            timeout_s=timeout_s, env={"TOOL_ARGS": json.dumps(action.args)})

    def render(self, step: str | dict | None) -> str:
        if step is None:
            name, args = "submit", {}
        elif isinstance(step, str):
            name, args = "bash", {"command": step}
        else:
            name, args = step["name"], step.get("arguments", {})
        return write_call(name, args, as_list=not self.native)
