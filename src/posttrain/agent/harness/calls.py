"""A reply's tool calls (read by posttrain.toolcalls) checked against the declared tools: a
known name, arguments that are a JSON object valid under the tool's JSON Schema. A call that
fails is an action of its failure kind, with the hint the model is answered."""

from __future__ import annotations

import json

import jsonschema

from posttrain.agent.protocol import Action
from posttrain.toolcalls import read_calls

MAX_CALLS_PER_REPLY = 4
NO_CALL_HINT = ("error: no tool call. Reply with <tool_call>[{\"name\": ..., \"arguments\": "
                "{...}}]</tool_call>, and call submit when the task is done.")


def check_call(call: dict | str, specs: dict[str, dict]) -> Action:
    """The call as an action, or the failure the model is told about."""
    if isinstance(call, str):
        return Action("bad_json", hint=f"error: the tool call is not a JSON object with 'name' "
                                       f"and 'arguments': {call[:80]!r}")
    name, args = call.get("name"), call.get("arguments", {})
    if not isinstance(name, str) or name not in specs:
        return Action("unknown_tool", name=str(name), hint=f"error: unknown tool {name!r}; "
                      f"available tools: {', '.join(specs)}")
    if isinstance(args, str):                 # some templates write arguments as a JSON string
        try:
            args = json.loads(args or "{}")
        except json.JSONDecodeError as e:
            return Action("bad_json", name=name, hint=f"error: arguments of {name} are not valid "
                                                      f"JSON ({e.msg})")
    if not isinstance(args, dict):
        return Action("bad_arguments", name=name,
                      hint=f"error: arguments of {name} must be a JSON object")
    try:
        jsonschema.validate(args, specs[name]["parameters"])
    except jsonschema.ValidationError as e:
        return Action("bad_arguments", name=name, args=args,
                      hint=f"error: bad arguments for {name}: {e.message[:120]}")
    if name == "submit":
        return Action("submit")
    return Action("tool", name=name, args=args)


def parse_calls(text: str, specs: dict[str, dict]) -> list[Action]:
    """A reply's actions: its calls checked (at most MAX_CALLS_PER_REPLY), or no_tool_call."""
    calls = read_calls(text)
    if not calls:
        return [Action("no_tool_call", hint=NO_CALL_HINT)]
    return [check_call(c, specs) for c in calls[:MAX_CALLS_PER_REPLY]]
