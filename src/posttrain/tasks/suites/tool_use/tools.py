"""The tools of the `tool-use` suite as tools.json declares them (JSON Schema), by family.
The program that runs them is program.py; the harness adds `submit` itself."""

from __future__ import annotations

from posttrain.tasks.suites.tool_use.program_base import DAYS

COMMAND = "python3 /app/.tools/run.py"

_S = {"type": "string"}
_KEY = {"type": "string", "description": "the key's name"}
_PATH = {"type": "string", "description": "a relative path such as notes/a.txt"}
_WH = {"type": "string", "description": "the warehouse's name"}
_ITEM = {"type": "string", "description": "the item's name"}
_QTY = {"type": "integer", "minimum": 1, "maximum": 10000}
_DAY = {"type": "string", "enum": list(DAYS)}

# name -> (description, properties, required)
TOOLS = {
    "kv_get": ("Read the value stored under a key.", {"key": _KEY}, ["key"]),
    "kv_set": ("Store a value under a key (creates or overwrites it).",
               {"key": _KEY, "value": _S}, ["key", "value"]),
    "kv_delete": ("Delete a key and its value.", {"key": _KEY}, ["key"]),
    "kv_list": ("List the names of all keys.", {}, []),
    "calculate": ("Evaluate arithmetic with numbers, + - * / // % and parentheses.",
                  {"expression": {"type": "string", "description": "e.g. (12 + 30) * 3"}},
                  ["expression"]),
    "list_files": ("List the files, all or those in one folder.",
                   {"folder": {"type": "string", "description": "a folder, e.g. inbox"}}, []),
    "read_file": ("Read a file's text.", {"path": _PATH}, ["path"]),
    "write_file": ("Create or overwrite a file with the given text.",
                   {"path": _PATH, "content": _S}, ["path", "content"]),
    "append_file": ("Add text as new line(s) at the end of a file.",
                    {"path": _PATH, "content": _S}, ["path", "content"]),
    "get_stock": ("How many units of an item a warehouse holds.",
                  {"warehouse": _WH, "item": _ITEM}, ["warehouse", "item"]),
    "add_stock": ("Add units of an item to a warehouse.",
                  {"warehouse": _WH, "item": _ITEM, "quantity": _QTY},
                  ["warehouse", "item", "quantity"]),
    "remove_stock": ("Remove units of an item from a warehouse.",
                     {"warehouse": _WH, "item": _ITEM, "quantity": _QTY},
                     ["warehouse", "item", "quantity"]),
    "list_items": ("List every item of a warehouse with its units.", {"warehouse": _WH},
                   ["warehouse"]),
    "list_events": ("List the calendar's events (id, title, day, hour), all or one day's.",
                    {"day": _DAY}, []),
    "add_event": ("Add an event to the calendar; the slot must be free.",
                  {"title": _S, "day": _DAY,
                   "hour": {"type": "integer", "minimum": 8, "maximum": 18,
                            "description": "start hour, 24h clock"}},
                  ["title", "day", "hour"]),
    "cancel_event": ("Cancel an event by its id.",
                     {"id": {"type": "string", "description": "the event's id, e.g. e104"}},
                     ["id"]),
}

FAMILY_TOOLS = {
    "kv": ("kv_get", "kv_set", "kv_delete", "kv_list"),
    "calc": ("calculate", "kv_get", "kv_set"),
    "files": ("list_files", "read_file", "write_file", "append_file"),
    "inventory": ("get_stock", "add_stock", "remove_stock", "list_items"),
    "calendar": ("list_events", "add_event", "cancel_event"),
}

# Calls that only read: the oracle needs them for values, a guessing agent skips them.
READS = ("kv_get", "kv_list", "calculate", "list_files", "read_file", "get_stock", "list_items",
         "list_events")


def declare(names: list[str]) -> dict:
    """tools.json's content for these tools, in the order given."""
    return {"command": COMMAND, "tools": [
        {"name": n, "description": TOOLS[n][0],
         "parameters": {"type": "object", "properties": TOOLS[n][1], "required": TOOLS[n][2]}}
        for n in names]}
