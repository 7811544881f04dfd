"""The eval tool agent reads calls as RL's harness does: structured ones, and `<tool_call>`
blocks in the reply text (Hermes objects or SmolLM2's list), each checked before it runs."""

from posttrain.agent.harness.calls import check_call
from posttrain.agent.harness.toolagent import _calls
from posttrain.agent.harness.tools import ToolHarness
from posttrain.tasks.tools import BASH

SPECS = ToolHarness(BASH, native=True).specs


def call(name, arguments):
    return {"id": "c", "type": "function", "function": {"name": name, "arguments": arguments}}


def kinds(message):
    return [(check_call(c, SPECS).kind, check_call(c, SPECS).hint[:40]) for _, c in _calls(message)]


def test_structured_calls_are_checked():
    message = {"tool_calls": [call("bash", '{"command": "ls"}'), call("submit", ""),
                              call("bash", "{ls"), call("python", "{}"),
                              call("bash", '{"command": " "}'), call("bash", '["ls"]'),
                              {"id": "x", "function": "bash"}]}
    got = [k for k, _ in kinds(message)]
    assert got == ["tool", "submit", "bad_json", "unknown_tool", "bad_arguments", "bad_arguments",
                   "bad_json"]
    (i, first), *_ = _calls(message)
    assert i == "c" and check_call(first, SPECS).args == {"command": "ls"}


def test_calls_written_in_the_text():
    text = ('I will look.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls /app"}}\n'
            '</tool_call><tool_call>[{"name": "submit", "arguments": {}}]</tool_call>')
    assert [k for k, _ in kinds({"content": text})] == ["tool", "submit"]
    assert [k for k, _ in kinds({"content": "<tool_call>bash ls</tool_call>"})] == ["bad_json"]
    assert _calls({"content": "no calls here"}) == []
