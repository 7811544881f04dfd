"""tool-use probes: agents that call tools without doing the task, which must score no more than
the no-op agent (0), and scripted partial agents whose score shows how the reward grades.

Each is a bash script run as the agent in /app; it calls tools the way the harness does
(`python3 /app/.tools/run.py NAME` with TOOL_ARGS), so what it earns an agent could earn.
"""

from __future__ import annotations

import json
import re

from posttrain.tasks import Task
from posttrain.tasks.suites.tool_use.families import WAREHOUSES
from posttrain.tasks.suites.tool_use.suite import calls_script
from posttrain.tasks.suites.tool_use.tools import READS

TICKED = re.compile(r"`([^`]+)`")


def _steps(task: Task) -> list[dict]:
    return json.loads((task.solution_dir / "steps.json").read_text())


def _declared(task: Task) -> list[dict]:
    return json.loads((task.path / "tools.json").read_text())["tools"]


# an argument -> the word the instruction puts before such a name ("warehouse `north`")
NAMED = {"key": "key", "path": "file", "warehouse": "warehouse", "title": "event",
         "folder": "Folder", "item": "all"}


def _plausible(arg: str, schema: dict, instruction: str):
    """An argument an agent might try without reading anything: a name from the instruction."""
    if "enum" in schema:
        return schema["enum"][0]
    if schema.get("type") == "integer":
        return schema.get("minimum", 1)
    named = re.search(rf"{NAMED.get(arg, arg)} `([^`]+)`", instruction)
    ticked = TICKED.findall(instruction)
    return named.group(1) if named else ticked[0] if ticked else "x"


def call_every_tool_once(task: Task) -> str:
    """Every declared tool once, in order, with arguments drawn from the instruction."""
    steps = [{"name": t["name"], "arguments": {
        k: _plausible(k, s, task.instruction) for k, s in t["parameters"]["properties"].items()}}
        for t in _declared(task)]
    return "cd /app\n" + calls_script(steps).replace("\n", " || true\n")


def guess_values(task: Task) -> str:
    """The oracle's writes without its reads: every value it read (tests/goal.json `derived`)
    replaced by a guess, as an agent that never looks at a tool's output would."""
    derived = {(i, a) for i, a in json.loads((task.tests_dir / "goal.json").read_text())["derived"]}
    steps = []
    for i, step in enumerate(_steps(task)):
        if step["name"] in READS:
            continue
        args = {k: (1 if isinstance(v, int) else "e1" if k == "id" else "0") if (i, k) in derived
                else v for k, v in step["arguments"].items()}
        steps.append({"name": step["name"], "arguments": args})
    return "cd /app\n" + calls_script(steps).replace("\n", " || true\n")


WIPE = r"""cd /app
python3 - <<'EOF'
import json, os, re, subprocess
def call(name, **args):
    return subprocess.run(["python3", "/app/.tools/run.py", name], capture_output=True, text=True,
                          env=dict(os.environ, TOOL_ARGS=json.dumps(args))).stdout
tools = set(TOOLS)
if {"kv_list", "kv_delete"} <= tools:
    for k in call("kv_list").splitlines()[0].removeprefix("keys: ").split(", "):
        call("kv_delete", key=k)
if {"list_events", "cancel_event"} <= tools:
    for i in re.findall(r"^(e\d+):", call("list_events"), re.M):
        call("cancel_event", id=i)
if {"list_items", "remove_stock"} <= tools:
    for w in WAREHOUSES:
        for item, n in re.findall(r"(\w+)=(\d+)", call("list_items", warehouse=w)):
            call("remove_stock", warehouse=w, item=item, quantity=int(n))
if {"list_files", "write_file"} <= tools:
    for p in call("list_files").splitlines()[0].removeprefix("files: ").split(", "):
        call("write_file", path=p, content="")
EOF
"""


def wipe_everything(task: Task) -> str:
    """Delete, cancel, empty or blank everything the list tools show (a sure way to meet any
    "remove X" goal, and to break everything else)."""
    names = [t["name"] for t in _declared(task)]
    return WIPE.replace("TOOLS", repr(names)).replace("WAREHOUSES", repr(list(WAREHOUSES)))


def oracle_minus_last_call(task: Task) -> str:
    """The oracle's calls without the last: part of the goal, nothing wrong."""
    return "cd /app\n" + calls_script(_steps(task)[:-1])


def first_call_only(task: Task) -> str:
    return "cd /app\n" + calls_script(_steps(task)[:1])


# Scripted partial agents (not probes): what they score shows how the reward grades.
PARTIAL = {"oracle_minus_last_call": oracle_minus_last_call, "first_call_only": first_call_only}

PROBES = {"call_every_tool_once": call_every_tool_once, "guess_values": guess_values,
          "wipe_everything": wipe_everything}
