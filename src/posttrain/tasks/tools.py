"""A task's declared tools (tools.json at the task's root), for the tool-calling harness.

    {"command": "python3 /app/.tools/run.py",
     "tools": [{"name": "kv_get", "description": "...", "parameters": {JSON Schema}}, ...]}

A call to NAME with arguments ARGS runs in the sandbox as `COMMAND NAME`, with ARGS as a JSON
object in the environment variable TOOL_ARGS; its output is the model's observation. The
harness adds `submit` itself. A task without tools.json offers `bash` and `submit`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from posttrain.errors import TaskError

TOOLS_FILE = "tools.json"
RESERVED = ("submit",)


@dataclass(frozen=True)
class ToolSet:
    command: str                 # the program that runs a call ("" for the built-in bash tool)
    specs: tuple[dict, ...]      # {"name", "description", "parameters"} per tool

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s["name"] for s in self.specs)

    def spec(self, name: str) -> dict | None:
        return next((s for s in self.specs if s["name"] == name), None)


BASH = ToolSet("", ({"name": "bash", "description": "Run one shell command in /app and return "
                     "its output.", "parameters": {"type": "object", "properties": {
                         "command": {"type": "string", "pattern": "\\S"}}, "required": ["command"]}},))


def task_tools(task) -> ToolSet | None:
    """The task's declared tools, or None when it declares none."""
    raw = task.files.get(TOOLS_FILE)
    if raw is None:
        path = task.path / TOOLS_FILE
        if not path.is_file():
            return None
        raw = path.read_text(encoding="utf-8")
    return parse_tools(raw, f"{task.id}/{TOOLS_FILE}")


def parse_tools(raw: str, where: str) -> ToolSet:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise TaskError(f"{where}: not valid JSON ({e.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("command"), str) \
            or not data["command"].strip() or not isinstance(data.get("tools"), list):
        raise TaskError(f"{where}: needs a non-empty string 'command' and a list 'tools'")
    specs = []
    for i, spec in enumerate(data["tools"]):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) \
                or not spec["name"].isidentifier():
            raise TaskError(f"{where}: tools[{i}] needs a 'name' that is an identifier")
        if spec["name"] in RESERVED:
            raise TaskError(f"{where}: tools[{i}]: {spec['name']!r} is added by the harness")
        params = spec.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, dict) or params.get("type") != "object":
            raise TaskError(f"{where}: tools[{i}].parameters must be a JSON Schema of type object")
        specs.append({"name": spec["name"], "description": str(spec.get("description", "")),
                      "parameters": params})
    if len({s["name"] for s in specs}) != len(specs):
        raise TaskError(f"{where}: tool names must be unique")
    return ToolSet(data["command"], tuple(specs))
