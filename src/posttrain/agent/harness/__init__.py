"""Harnesses: how a model acts in an episode, one class per protocol, chosen here.

| name    | the model writes                            | observations come back as |
|---------|---------------------------------------------|---------------------------|
| `text`  | `<bash>COMMAND</bash>` or `<submit/>`       | the template's user turn  |
| `tools` | `<tool_call>` blocks naming declared tools  | `tool` messages           |

`agent.harness = "auto"` (the default) picks `tools` for a task that declares tools
(tools.json) and `text` for the others. RL, eval and validate all go through `harness_for`.
"""

from __future__ import annotations

from posttrain.agent.harness.base import Harness
from posttrain.agent.harness.text import TextHarness
from posttrain.agent.harness.tools import ToolHarness
from posttrain.tasks.tools import BASH, task_tools

HARNESSES = ("auto", "text", "tools")

__all__ = ["HARNESSES", "Harness", "harness_for"]


def harness_for(task, kind: str, framer) -> Harness:
    """The harness an episode of `task` runs under (`kind` from agent.harness)."""
    tools = task_tools(task)
    if kind == "text" or (kind == "auto" and tools is None):
        return TextHarness()
    return ToolHarness(tools or BASH, native=bool(getattr(framer, "renders_tools", False)))
