"""The `tool-use` suite's five families, each a few task templates (combos). A combo draws one
task's initial state, instruction and oracle calls from a seeded generator for a given number
of calls; the suite (suite.py) plays the calls through the tool program to get the goal.
Values the agent must write come from tool outputs (marked `derived`), never the instruction."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

from posttrain.tasks.suites.tool_use.check import kv_item
from posttrain.tasks.suites.tool_use.program_base import evaluate, format_number

WORDS = ("alpha", "bravo", "cedar", "delta", "ember", "fjord", "gamma", "harbor", "indigo",
         "jasper", "kestrel", "lemon", "mango", "nectar", "onyx", "pearl", "quartz", "river",
         "sierra", "tango", "umber", "violet", "walnut", "xenon", "yarrow", "zephyr")
VALUES = ("red", "blue", "green", "amber", "silver", "copper", "ivory", "olive", "coral",
          "slate", "maple", "plum", "sand", "teal", "rust", "mint")
ITEMS = ("apples", "pears", "bolts", "nails", "cables", "boxes", "lamps", "tiles", "ropes",
         "gloves", "hinges", "valves")
WAREHOUSES = ("north", "south", "east", "west")
TITLES = ("Standup", "Dentist", "Gym", "Review", "Budget call", "Demo", "Planning", "Interview",
          "Retro", "Doctor", "Yoga", "Lunch", "Sync", "Workshop", "Training", "Call home")


@dataclass
class Draft:
    """One task before its goal is computed."""
    instruction: str
    state: dict
    steps: list[dict] = field(default_factory=list)
    derived: list[list] = field(default_factory=list)   # [step index, argument] read earlier
    after: list[list] = field(default_factory=list)     # [item, item it counts only after]

    def call(self, name: str, derived: tuple[str, ...] = (), **args) -> None:
        self.derived += [[len(self.steps), a] for a in derived]
        self.steps.append({"name": name, "arguments": args})


@dataclass(frozen=True)
class Combo:
    calls: tuple[int, ...]                         # oracle lengths it can be drawn at
    draw: Callable[[random.Random, int], Draft]


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _sentence(parts: list[str], end: str = ".") -> str:
    text = _and(parts)
    return text[0].upper() + text[1:] + end


def _names(rng: random.Random, n: int, pool=WORDS) -> list[str]:
    return rng.sample(pool, n)


# kv: copy, move, purge (train); swap (held out)

def _kv_state(rng, keys: list[str]) -> dict:
    values = rng.sample(VALUES, len(keys))
    return {"kv": dict(zip(keys, values))}


def kv_copy(rng, calls):
    keys = _names(rng, calls + rng.randint(1, 3))          # k sources, k targets, extras
    pairs, kept = [(keys[2 * i], keys[2 * i + 1]) for i in range(calls // 2)], keys[calls:]
    d = Draft(_sentence([f"copy the value of key `{s}` into key `{t}`" for s, t in pairs]),
              _kv_state(rng, [s for s, _ in pairs] + kept))
    for s, t in pairs:
        d.call("kv_get", key=s)
        d.call("kv_set", ("value",), key=t, value=d.state["kv"][s])
    return d


def kv_move(rng, calls):
    keys = _names(rng, calls // 3 * 2 + rng.randint(1, 3))
    pairs, kept = [(keys[2 * i], keys[2 * i + 1]) for i in range(calls // 3)], keys[calls // 3 * 2:]
    moves = _and([f"the value of key `{s}` to key `{t}`" for s, t in pairs])
    d = Draft(f"Move {moves}. A moved key must no longer exist afterwards.",
              _kv_state(rng, [s for s, _ in pairs] + kept))
    for s, t in pairs:
        d.call("kv_get", key=s)
        d.call("kv_set", ("value",), key=t, value=d.state["kv"][s])
        d.call("kv_delete", key=s)
        d.after.append([kv_item(s), kv_item(t)])           # deleting first loses the value
    return d


def kv_purge(rng, calls):
    words = _names(rng, calls - 1 + rng.randint(2, 4))
    doomed = [f"tmp_{w}" for w in words[:calls - 1]]
    d = Draft("Delete every key whose name starts with `tmp_`. Keep all other keys.",
              _kv_state(rng, doomed + words[calls - 1:]))
    d.call("kv_list")
    for k in sorted(doomed):
        d.call("kv_delete", ("key",), key=k)
    return d


def kv_swap(rng, calls):
    a, b, *kept = _names(rng, 2 + rng.randint(1, 3))
    d = Draft(f"Swap the values of keys `{a}` and `{b}`.", _kv_state(rng, [a, b, *kept]))
    va, vb = d.state["kv"][a], d.state["kv"][b]
    d.call("kv_get", key=a)
    d.call("kv_get", key=b)
    d.call("kv_set", ("value",), key=a, value=vb)
    d.call("kv_set", ("value",), key=b, value=va)
    return d


# calc: compute_store, read_compute (train); two_results (held out)

def _expr(rng, terms: list[str]) -> str:
    out = terms[0]
    for t in terms[1:]:
        out += f" {rng.choice('+-*')} {t}"
    return out


def _calc_state(rng, names: list[str], avoid: tuple[str, ...]) -> tuple[dict, dict]:
    """Numbers under the operand keys, plus two unrelated keys (never a key to write)."""
    nums = {n: rng.randint(2, 60) for n in names}
    extra = {w: str(rng.randint(2, 60)) for w in _names(rng, 2) if w not in (*nums, *avoid)}
    return nums, {"kv": {**extra, **{n: str(v) for n, v in nums.items()}}}


def _holding(names: list[str]) -> str:
    held = _and([f"`{n}`" for n in names])
    return f"Keys {held} hold numbers." if len(names) > 1 else f"Key {held} holds a number."


def _numeric(expr: str, nums: dict) -> str:
    return " ".join(str(nums.get(tok, tok)) for tok in expr.split())


def _result(expr: str) -> str:
    return format_number(evaluate(expr))


def calc_compute_store(rng, calls):
    key = rng.choice(WORDS)
    while True:
        expr = _expr(rng, [str(rng.randint(2, 60)) for _ in range(rng.randint(2, 3))])
        if _result(expr) not in ("0", "1") and _result(expr) not in expr.split():
            break
    d = Draft(f"Use the calculator to compute {expr}, then store the result under key `{key}`.",
              {"kv": {w: str(rng.randint(2, 60)) for w in _names(rng, 2) if w != key}})
    d.call("calculate", expression=expr)
    d.call("kv_set", ("value",), key=key, value=_result(expr))
    return d


def calc_read_compute(rng, calls):
    *names, key = _names(rng, calls - 1)
    while True:
        nums, state = _calc_state(rng, names, (key,))
        expr = _expr(rng, names + ([str(rng.randint(2, 9))] if len(names) == 1 else []))
        value = _result(_numeric(expr, nums))
        if value not in ("0", "1"):
            break
    d = Draft(f"{_holding(names)} Use the calculator to compute {expr} "
              f"with {'those values' if len(names) > 1 else 'that value'}, then store the "
              f"result under key `{key}`.", state)
    for n in names:
        d.call("kv_get", key=n)
    d.call("calculate", ("expression",), expression=_numeric(expr, nums))
    d.call("kv_set", ("value",), key=key, value=value)
    return d


def calc_two_results(rng, calls):
    names = _names(rng, calls - 4 + 2)
    names, (k1, k2) = names[:calls - 4], names[calls - 4:]
    nums, state = _calc_state(rng, names, (k1, k2))
    e1 = f"{names[0]} + {names[1] if len(names) > 1 else rng.randint(2, 9)}"
    e2 = f"{names[0]} * {names[1] if len(names) > 1 else rng.randint(2, 9)}"
    d = Draft(f"{_holding(names)} Using the calculator, store {e1} under "
              f"key `{k1}` and {e2} under key `{k2}`.", state)
    for n in names:
        d.call("kv_get", key=n)
    for k, e in ((k1, e1), (k2, e2)):
        d.call("calculate", ("expression",), expression=_numeric(e, nums))
        d.call("kv_set", ("value",), key=k, value=_result(_numeric(e, nums)))
    return d


KV = {"copy": Combo((2, 4, 6), kv_copy), "move": Combo((3, 6), kv_move),
      "purge": Combo((2, 3, 4, 5, 6), kv_purge), "swap": Combo((4,), kv_swap)}
CALC = {"compute_store": Combo((2,), calc_compute_store),
        "read_compute": Combo((3, 4, 5, 6), calc_read_compute),
        "two_results": Combo((5, 6), calc_two_results)}
