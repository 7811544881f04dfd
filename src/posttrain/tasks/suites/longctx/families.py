"""The text families of longctx: needles, variable tracking, bAbI-style moves, aggregation.

Each returns a Probe: the question, the expected items, and the sentences to hide in
the haystack (`needles`, inserted at random depths in order) or whole documents.
No answer item ever appears in the question.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field

# Two surface forms per concept: needles use the first, nolex questions the second.
ADJ = [("crimson", "red"), ("azure", "blue"), ("emerald", "green"), ("ivory", "white"),
       ("ebony", "black"), ("golden", "yellow"), ("violet", "purple"), ("tiny", "small"),
       ("enormous", "big"), ("ancient", "old")]
NOUN = [("vessel", "ship"), ("steed", "horse"), ("hound", "dog"), ("dwelling", "house"),
        ("automobile", "car"), ("timepiece", "clock"), ("volume", "book"), ("lantern", "lamp"),
        ("kitten", "cat"), ("blossom", "flower")]
PEOPLE = ("Mary", "John", "Daniel", "Sandra", "Fred", "Julie", "Bill", "Emma")
ROOMS = ("kitchen", "garden", "hallway", "bathroom", "bedroom", "office", "cellar", "attic")
OBJECTS = ("apple", "football", "milk", "key", "umbrella", "lantern", "letter", "hat")
CITIES = ("Oslo", "Lima", "Perth", "Dakar", "Quito", "Hanoi", "Riga", "Tunis", "Cusco", "Bergen",
          "Nantes", "Porto", "Malmo", "Graz", "Turku", "Split")
GOODS = ("copper", "timber", "wool", "salt", "coffee", "glass", "cotton", "marble")


@dataclass
class Probe:
    family: str
    question: str
    items: list[str]
    needles: list[str] = field(default_factory=list)
    documents: dict[str, list[str]] = field(default_factory=dict)   # name -> sentences


def _number(rng: random.Random, used: set) -> str:
    while True:
        n = str(rng.randint(10000, 99999))
        if n not in used:
            used.add(n)
            return n


def _keys(rng, k):
    pairs = [(a, n) for a in ADJ for n in NOUN]
    return rng.sample(pairs, k)


def _needle(adj, noun, value):
    return f"Note: the {adj[0]} {noun[0]} is tagged {value}."


def needle(rng, n_distract: int = 0, family: str = "needle", form: int = 0) -> Probe:
    keys, used = _keys(rng, 1 + n_distract), set()
    values = [_number(rng, used) for _ in keys]
    needles = [_needle(a, n, v) for (a, n), v in zip(keys, values)]
    rng.shuffle(needles)
    (a, n) = keys[0]
    ask = (f"What number is the {a[0]} {n[0]} tagged with?" if form == 0 else
           f"Which value belongs to the {a[1]} {n[1]}?")     # nolex: synonyms only
    return Probe(family, ask, [values[0]], needles)


def multikey(rng) -> Probe:
    return needle(rng, rng.randint(4, 12), "multikey")


def multivalue(rng) -> Probe:
    keys, used = _keys(rng, rng.randint(2, 5)), set()
    (a, n), k = keys[0], rng.randint(2, 4)
    values = [_number(rng, used) for _ in range(k)]
    needles = [_needle(a, n, v) for v in values]
    needles += [_needle(ka, kn, _number(rng, used)) for ka, kn in keys[1:]]
    rng.shuffle(needles)
    return Probe("multivalue", f"List every number the {a[0]} {n[0]} is tagged with.", values, needles)


def nolex(rng) -> Probe:
    """The question shares no content word with its needle (synonyms only)."""
    return needle(rng, rng.randint(2, 6), "nolex", form=1)


def _var(rng, used):
    while True:
        v = "".join(rng.choice(string.ascii_uppercase) for _ in range(5))
        if v not in used:
            used.add(v)
            return v


def vartrack(rng) -> Probe:
    used, nums = set(), set()
    chains = []
    for _ in range(rng.randint(2, 4)):
        value, names = _number(rng, nums), [_var(rng, used) for _ in range(rng.randint(2, 5))]
        lines = [f"VAR {names[0]} = {value}"] + [f"VAR {b} = {a}" for a, b in zip(names, names[1:])]
        chains.append((value, names, lines))
    # interleave the chains, never reordering within one
    merged, queues = [], [list(c[2]) for c in chains]
    while any(queues):
        q = rng.choice([q for q in queues if q])
        merged.append(q.pop(0))
    value, names, _ = chains[0]
    return Probe("vartrack", f"Which variables end up holding the value {value}? List their names.",
                 names, merged)


def babi(rng) -> Probe:
    people = rng.sample(PEOPLE, 3)
    obj = rng.choice(OBJECTS)
    holder = people[0]
    moves = []
    where = {}
    for _ in range(rng.randint(4, 8)):
        p, room = rng.choice(people), rng.choice(ROOMS)
        moves.append(f"{p} went to the {room}.")
        where[p] = room
    moves.insert(rng.randint(0, len(moves)), f"{holder} picked up the {obj}.")
    if holder not in where:
        room = rng.choice(ROOMS)
        moves.append(f"{holder} went to the {room}.")
        where[holder] = room
    return Probe("babi", f"Where is the {obj} at the end? Name the room.", [where[holder]], moves)


def aggregate(rng) -> Probe:
    good = rng.choice(GOODS)
    cities = rng.sample(CITIES, 10)
    wanted = cities[:rng.randint(2, 5)]
    n_docs = rng.randint(3, 6)
    docs: dict[str, list[str]] = {f"log_{i:02d}.txt": [] for i in range(n_docs)}
    names = list(docs)
    for c in wanted:
        docs[rng.choice(names)].append(f"Shipping log: the port of {c} received a cargo of {good}.")
    others = [g for g in GOODS if g != good]
    for c in cities[len(wanted):] + wanted:
        docs[rng.choice(names)].append(
            f"Shipping log: the port of {c} received a cargo of {rng.choice(others)}.")
    return Probe("aggregate", f"Across all the logs, which ports received {good}? List them.",
                 wanted, documents=docs)


FAMILIES = {f.__name__: f for f in (needle, multikey, multivalue, nolex, vartrack, babi, aggregate)}
