"""The `tool-use` verifier, shipped as tests/check.py (stdlib only): partial credit from the
final state file.

The state is flattened to items (`kv:KEY` -> value, `file:PATH` -> its lines, `stock:W/ITEM`
-> units, `event:TITLE|DAY|HOUR` -> how many), so an event's id or a file's trailing newline
does not matter. tests/goal.json holds the initial state and the goal's conditions, one per item
the goal changes: {"item", "value" (null: gone), "after": [items that must be done first]}.
reward = conditions met / conditions, and 0 when the state is not clean: an item outside the
goal changed, or a goal item holds a value that is neither its first one nor its target.
"""

import json
import math
import os
import stat

STATE = "/app/.state/state.json"
GOAL = "/tests/goal.json"
OUT = "/logs/verifier/reward.json"


def kv_item(key):
    return f"kv:{key}"


def file_item(path):
    return f"file:{path}"


def stock_item(warehouse, item):
    return f"stock:{warehouse}/{item}"


def event_item(title, day, hour):
    return f"event:{title.strip().lower()}|{day}|{hour}"


def _value(v):
    """A kv value: numbers by value ("42" == "42.0"), other text stripped."""
    text = str(v).strip()
    try:
        x = float(text)
    except ValueError:
        return text
    if not math.isfinite(x):
        return text
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)


def _lines(text):
    return "\n".join(ln.strip() for ln in str(text).splitlines() if ln.strip())


def flatten(state):
    """{item: value} of a state; raises ValueError (or TypeError) on a malformed one."""
    if not isinstance(state, dict):
        raise ValueError("state is not an object")
    items = {}
    for section, body in state.items():
        if section == "kv":
            items |= {kv_item(k): _value(v) for k, v in body.items()}
        elif section == "files":
            items |= {file_item(p): _lines(t) for p, t in body.items()}
        elif section == "stock":
            items |= {stock_item(w, i): int(n) for w, shelf in body.items()
                      for i, n in shelf.items() if int(n)}
        elif section == "events":
            for e in body:
                key = event_item(e["title"], e["day"], int(e["hour"]))
                items[key] = items.get(key, 0) + 1
        else:
            items[f"section:{section}"] = json.dumps(body, sort_keys=True)
    return items


def score(initial, final, conditions):
    """{"reward": r, "clean": 0/1, "goal_1": 0/1, ...} of a final state against the goal."""
    first, now = flatten(initial), flatten(final)
    goal = {c["item"]: c["value"] for c in conditions}
    met = {item: now.get(item) == value for item, value in goal.items()}
    clean = all(now.get(k) == first.get(k) for k in set(first) | set(now) if k not in goal) \
        and all(now.get(k) in (first.get(k), v) for k, v in goal.items())
    credit = [met[c["item"]] and all(met[a] for a in c.get("after", [])) for c in conditions]
    out = {"reward": sum(credit) / len(credit) if clean else 0.0, "clean": float(clean)}
    out |= {f"goal_{i + 1}": float(c) for i, c in enumerate(credit)}
    return out


def read_state(path):
    """The agent's final state: a regular file of at most 1 MB holding JSON (a FIFO would hang)."""
    if not stat.S_ISREG(os.stat(path).st_mode) or os.path.getsize(path) > 1_000_000:
        raise ValueError("not a regular file of at most 1 MB")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main():
    goal = json.load(open(GOAL, encoding="utf-8"))
    try:
        result = score(goal["initial"], read_state(STATE), goal["conditions"]) | {"state_ok": 1.0}
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
        print(f"unreadable state: {type(e).__name__}: {e}")
        result = {"reward": 0.0, "state_ok": 0.0}
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(result, f)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
