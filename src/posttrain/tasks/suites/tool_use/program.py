"""The tool program of the `tool-use` suite, shipped into each task as /app/.tools/run.py
after program_base.py (suite.py `shipped_program`; stdlib only): `python3 /app/.tools/run.py
NAME` with the call's arguments as a JSON object in TOOL_ARGS. All state is one JSON file, /app/.state/state.json; /app/.tools/config.json names
the tools the task declares and the filler its list outputs end with. Arguments are checked
here too (names by pattern, numbers by range, text by length), nothing is evaluated (the
calculator walks an ast of + - * / // % and parentheses), and every failure is one line
`error: ...` with a non-zero exit, never a traceback.
"""

import json
import os
import sys

# Inside a task this import is cut out: run.py is program_base.py followed by this file.
from posttrain.tasks.suites.tool_use.program_base import (
    DAYS,
    MAX_ARGS,
    MAX_ENTRIES,
    MAX_STOCK,
    MAX_TEXT,
    PATH_RE,
    ToolError,
    evaluate,
    format_number,
    int_arg,
    name_arg,
    text_arg,
)

STATE = "/app/.state/state.json"
CONFIG = "/app/.tools/config.json"


# the tools: each takes (state, args, pad) and returns (output, changed)

def _kv(state):
    return state.setdefault("kv", {})


def kv_get(state, args, pad):
    key = name_arg(args, "key")
    if key not in state.get("kv", {}):
        raise ToolError(f"no key '{key}'")
    return f"value: {state['kv'][key]}", False


def kv_set(state, args, pad):
    key, value = name_arg(args, "key"), text_arg(args, "value")
    if key not in _kv(state) and len(state["kv"]) >= MAX_ENTRIES:
        raise ToolError("too many keys")
    state["kv"][key] = value
    return "ok", True


def kv_delete(state, args, pad):
    key = name_arg(args, "key")
    if key not in state.get("kv", {}):
        raise ToolError(f"no key '{key}'")
    del state["kv"][key]
    return "ok", True


def kv_list(state, args, pad):
    keys = sorted(state.get("kv", {}))
    return "keys: " + (", ".join(keys) or "(none)") + pad, False


def calculate(state, args, pad):
    return f"result: {format_number(evaluate(args.get('expression')))}", False


def list_files(state, args, pad):
    folder = name_arg(args, "folder", PATH_RE, optional=True).rstrip("/")
    names = sorted(p for p in state.get("files", {}) if not folder or p.startswith(folder + "/"))
    return "files: " + (", ".join(names) or "(none)") + pad, False


def read_file(state, args, pad):
    path = name_arg(args, "path", PATH_RE)
    if path not in state.get("files", {}):
        raise ToolError(f"no file '{path}'")
    return state["files"][path].rstrip("\n") or "(empty file)", False


def write_file(state, args, pad, append=False):
    path, content = name_arg(args, "path", PATH_RE), text_arg(args, "content")
    files = state.setdefault("files", {})
    if path not in files and len(files) >= MAX_ENTRIES:
        raise ToolError("too many files")
    old = files.get(path, "") if append else ""
    if old and not old.endswith("\n"):
        old += "\n"
    new = old + content + ("" if content.endswith("\n") or not content else "\n")
    if len(new) > MAX_TEXT:
        raise ToolError(f"a file holds at most {MAX_TEXT} characters")
    files[path] = new
    return "ok", True


def append_file(state, args, pad):
    return write_file(state, args, pad, append=True)


def _shelf(state, args):
    warehouse, item = name_arg(args, "warehouse"), name_arg(args, "item")
    if warehouse not in state.get("stock", {}):
        raise ToolError(f"no warehouse '{warehouse}'")
    return state["stock"][warehouse], item


def get_stock(state, args, pad):
    shelf, item = _shelf(state, args)
    return f"stock: {shelf.get(item, 0)}", False


def add_stock(state, args, pad):
    shelf, item = _shelf(state, args)
    n = shelf.get(item, 0) + int_arg(args, "quantity", 1, 10_000)
    if n > MAX_STOCK or (item not in shelf and len(shelf) >= MAX_ENTRIES):
        raise ToolError("warehouse is full")
    shelf[item] = n
    return f"ok, stock: {n}", True


def remove_stock(state, args, pad):
    shelf, item = _shelf(state, args)
    q, have = int_arg(args, "quantity", 1, 10_000), shelf.get(item, 0)
    if q > have:
        raise ToolError(f"only {have} units of '{item}' in stock")
    shelf[item] = have - q
    if not shelf[item]:
        del shelf[item]
    return f"ok, stock: {have - q}", True


def list_items(state, args, pad):
    warehouse = name_arg(args, "warehouse")
    if warehouse not in state.get("stock", {}):
        raise ToolError(f"no warehouse '{warehouse}'")
    items = sorted(state["stock"][warehouse].items())
    return f"{warehouse}: " + (", ".join(f"{k}={v}" for k, v in items) or "(empty)") + pad, False


def _day(args, optional=False):
    day = args.get("day")
    if day is None and optional:
        return ""
    if not isinstance(day, str) or day.lower() not in DAYS:
        raise ToolError(f"argument 'day' must be one of {', '.join(DAYS)}")
    return day.lower()


def list_events(state, args, pad):
    day = _day(args, optional=True)
    events = sorted((DAYS.index(e["day"]), e["hour"], e["id"], e) for e in state.get("events", [])
                    if not day or e["day"] == day)
    lines = [f"{i}: {e['title']}, {e['day']} {e['hour']}:00" for _, _, i, e in events]
    return ("\n".join(lines) or "no events") + pad, False


def add_event(state, args, pad):
    title, day, hour = text_arg(args, "title").strip(), _day(args), int_arg(args, "hour", 8, 18)
    if not title or len(title) > 60 or "\n" in title:
        raise ToolError("argument 'title' must be one line of 1 to 60 characters")
    events = state.setdefault("events", [])
    taken = [e["id"] for e in events if e["day"] == day and e["hour"] == hour]
    if taken:
        raise ToolError(f"{day} {hour}:00 is taken by {taken[0]}")
    if len(events) >= MAX_ENTRIES:
        raise ToolError("too many events")
    new = "e" + str(max([int(e["id"][1:]) for e in events if e["id"][1:].isdigit()] + [100]) + 1)
    events.append({"title": title, "day": day, "hour": hour, "id": new})   # id last: see _save
    return f"ok, id: {new}", True


def cancel_event(state, args, pad):
    event = name_arg(args, "id")
    kept = [e for e in state.get("events", []) if e["id"] != event]
    if len(kept) == len(state.get("events", [])):
        raise ToolError(f"no event '{event}'")
    state["events"] = kept
    return "ok", True


TOOLS = {f.__name__: f for f in (kv_get, kv_set, kv_delete, kv_list, calculate, list_files,
                                 read_file, write_file, append_file, get_stock, add_stock,
                                 remove_stock, list_items, list_events, add_event, cancel_event)}


def call(state, name, args, pad=""):
    """(output, changed) of one call; state is changed in place. Raises ToolError."""
    if not isinstance(args, dict):
        raise ToolError("TOOL_ARGS must be a JSON object")
    return TOOLS[name](state, args, "\n" + pad if pad else "")


def _load(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ToolError(f"{path} is damaged")
    return data


def _save(state):
    # One field a line, in the order given (an event's id last), so a line an edit changes
    # first is a value the verifier reads.
    text = json.dumps(state, indent=1) + "\n"
    tmp = STATE + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, STATE)


def main(argv):
    try:
        config = _load(CONFIG)
        if len(argv) != 2 or argv[1] not in config.get("tools", []) or argv[1] not in TOOLS:
            raise ToolError(f"unknown tool {argv[1:2]}; tools: {', '.join(config.get('tools', []))}")
        raw = os.environ.get("TOOL_ARGS", "{}")
        if len(raw) > MAX_ARGS:
            raise ToolError(f"TOOL_ARGS longer than {MAX_ARGS} characters")
        try:
            args = json.loads(raw)
        except ValueError:
            raise ToolError("TOOL_ARGS is not valid JSON")
        try:
            state = _load(STATE)
        except (OSError, ValueError):
            raise ToolError("the state file is missing or damaged")
        out, changed = call(state, argv[1], args, str(config.get("pad", "")))
        if changed:
            _save(state)
        print(out)
        return 0
    except ToolError as e:
        print(f"error: {e}")
        return 1
    except Exception as e:   # a bug or a hostile input we did not foresee: still one line
        print(f"error: the call failed ({type(e).__name__})")
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
