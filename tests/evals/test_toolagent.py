"""Parsing tool calls: structured ones, and Hermes-style calls written in the reply text."""

import json

from posttrain.evals.toolagent import parse_tool_call, tool_calls_in_text

TOOLS = ("bash", "submit")


def call(name, arguments):
    return {"id": "c", "type": "function", "function": {"name": name, "arguments": arguments}}


def test_parse_tool_call_cases():
    assert parse_tool_call(call("bash", '{"command": "ls"}'), TOOLS) == ("bash", {"command": "ls"}, "")
    assert parse_tool_call(call("submit", ""), TOOLS) == ("submit", {}, "")
    assert "not valid JSON" in parse_tool_call(call("bash", "{ls"), TOOLS)[2]
    assert "unknown tool" in parse_tool_call(call("python", "{}"), TOOLS)[2]
    assert "non-empty" in parse_tool_call(call("bash", '{"command": " "}'), TOOLS)[2]
    assert "JSON object" in parse_tool_call(call("bash", '["ls"]'), TOOLS)[2]
    assert "unknown tool" in parse_tool_call({"function": "bash"}, TOOLS)[2]


def test_hermes_calls_in_text():
    text = ('I will look.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls /app"}}\n'
            '</tool_call><tool_call>{"name": "submit", "arguments": {}}</tool_call>')
    calls = tool_calls_in_text(text)
    assert [c["function"]["name"] for c in calls] == ["bash", "submit"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"command": "ls /app"}
    assert parse_tool_call(calls[0], TOOLS) == ("bash", {"command": "ls /app"}, "")


def test_hermes_call_that_is_not_json_is_reported_malformed():
    (c,) = tool_calls_in_text("<tool_call>bash ls</tool_call>")
    assert parse_tool_call(c, TOOLS)[2].startswith("error: unknown tool")
    assert tool_calls_in_text("no calls here") == []
