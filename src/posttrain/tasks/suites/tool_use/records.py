"""The `tool-use` families that keep records: files (a virtual file store), inventory
(warehouses' stock) and calendar (events by id). Same shape as families.py."""

from __future__ import annotations

from posttrain.tasks.suites.tool_use.check import event_item
from posttrain.tasks.suites.tool_use.families import (ITEMS, TITLES, VALUES, WAREHOUSES, WORDS,
                                                      Combo, Draft, _and, _names,
                                                      _sentence)
from posttrain.tasks.suites.tool_use.program_base import DAYS


# files: append, merge (train); find (held out)

def _files(rng, n: int, folders=("notes", "docs", "")) -> dict:
    """n files, each one line of three words, at distinct paths."""
    paths = [f"{f}/{w}.txt".lstrip("/") for f, w in zip(rng.choices(folders, k=n), _names(rng, n))]
    return {p: " ".join(rng.sample(VALUES + WORDS, 3)) + "\n" for p in paths}


def files_append(rng, calls):
    k = calls // 2
    files = _files(rng, 2 * k + rng.randint(0, 2))
    paths = list(files)
    pairs = [(paths[2 * i], paths[2 * i + 1]) for i in range(k)]
    d = Draft(_sentence([f"append the line of file `{s}` to the end of file `{t}`"
                         for s, t in pairs]), {"files": files})
    for s, t in pairs:
        d.call("read_file", path=s)
        d.call("append_file", ("content",), path=t, content=files[s].strip())
    return d


def files_merge(rng, calls):
    files = _files(rng, calls - 1 + rng.randint(1, 2))
    sources, dest = list(files)[:calls - 1], f"out/{rng.choice(['summary', 'digest', 'all'])}.txt"
    d = Draft(f"Create file `{dest}` holding the lines of files "
              f"{_and([f'`{s}`' for s in sources])}, in that order, one per line.",
              {"files": files})
    for s in sources:
        d.call("read_file", path=s)
    d.call("write_file", ("content",), path=dest,
           content="\n".join(files[s].strip() for s in sources))
    return d


def files_find(rng, calls):
    files = _files(rng, calls - 2, folders=("inbox",)) | _files(rng, rng.randint(1, 3))
    inbox = sorted(p for p in files if p.startswith("inbox/"))
    d = Draft("Folder `inbox` holds some files of one line each. Write their lines, in "
              "file-name order, one per line, into a new file `answer.txt`.", {"files": files})
    d.call("list_files", folder="inbox")
    for p in inbox:
        d.call("read_file", ("path",), path=p)
    d.call("write_file", ("content",), path="answer.txt",
           content="\n".join(files[p].strip() for p in inbox))
    return d


# inventory: restock, transfer (train); trim (held out)

def _stock(rng, houses: list[str]) -> dict:
    return {"stock": {w: {i: rng.randint(2, 60) for i in rng.sample(ITEMS, rng.randint(3, 5))}
                      for w in houses}}


def inventory_restock(rng, calls):
    state = _stock(rng, _names(rng, rng.randint(2, 3), WAREHOUSES))
    shelves = rng.sample([(w, i) for w, s in state["stock"].items() for i in s], calls // 2)
    targets = {s: state["stock"][s[0]][s[1]] + rng.randint(2, 40) for s in shelves}
    d = Draft(_sentence([f"bring the stock of `{i}` in warehouse `{w}` up to exactly "
                         f"{targets[w, i]} units" for w, i in shelves]), state)
    for w, i in shelves:
        d.call("get_stock", warehouse=w, item=i)
        d.call("add_stock", ("quantity",), warehouse=w, item=i,
               quantity=targets[w, i] - state["stock"][w][i])
    return d


def inventory_transfer(rng, calls):
    src, dst = _names(rng, 2, WAREHOUSES)
    state = _stock(rng, [src, dst])
    moved = rng.sample(sorted(state["stock"][src]), calls // 3)
    d = Draft(f"Move all {_and([f'`{i}`' for i in moved])} from warehouse `{src}` to warehouse "
              f"`{dst}`.", state)
    for i in moved:
        q = state["stock"][src][i]
        d.call("get_stock", warehouse=src, item=i)
        d.call("remove_stock", ("quantity",), warehouse=src, item=i, quantity=q)
        d.call("add_stock", ("quantity",), warehouse=dst, item=i, quantity=q)
    return d


def inventory_trim(rng, calls):
    house, cap = rng.choice(WAREHOUSES), rng.randint(10, 30)
    items = rng.sample(ITEMS, calls - 1 + rng.randint(1, 3))
    shelf = {i: cap + rng.randint(2, 40) if n < calls - 1 else rng.randint(2, cap)
             for n, i in enumerate(items)}
    others = _stock(rng, [w for w in _names(rng, 2, WAREHOUSES) if w != house])["stock"]
    d = Draft(f"In warehouse `{house}`, every item with more than {cap} units must go down to "
              f"exactly {cap} units (remove the surplus).", {"stock": {house: shelf, **others}})
    d.call("list_items", warehouse=house)
    for i in sorted(i for i in shelf if shelf[i] > cap):
        d.call("remove_stock", ("item", "quantity"), warehouse=house, item=i,
               quantity=shelf[i] - cap)
    return d


# calendar (the held-out family): reschedule, clear_day, book

def _calendar(rng, n: int, busy_day: str = "", on_day: int = 0) -> dict:
    """{id: event}: n events (on_day of them on busy_day, none other there), distinct titles
    and slots."""
    days = [d for d in DAYS if d != busy_day]
    slots = [(busy_day, h) for h in rng.sample(range(8, 19), on_day)] if busy_day else []
    free = [(d, h) for d in days for h in range(8, 19)]
    slots += rng.sample(free, n - on_day)
    ids = rng.sample(range(100, 900), n)
    titles = rng.sample(TITLES, n)
    return {f"e{i}": {"title": t, "day": d, "hour": h} for i, t, (d, h) in zip(ids, titles, slots)}


def _listed(events: dict) -> dict:
    """The state as the program keeps it: a list, each event's id a field (a changed id is
    then no line of its own, and the verifier never reads ids)."""
    return {"events": [{**e, "id": i} for i, e in events.items()]}


def _slot(d: str, h: int) -> str:
    return f"{d} at {h}:00"


def calendar_reschedule(rng, calls):
    events = _calendar(rng, rng.randint(4, 7))
    moved = rng.sample(sorted(events), (calls - 1) // 2)
    taken = {(e["day"], e["hour"]) for e in events.values()}
    new = rng.sample([(d, h) for d in DAYS for h in range(8, 19) if (d, h) not in taken], len(moved))
    d = Draft(_sentence([f"move the event `{events[i]['title']}` to {_slot(*s)}"
                         for i, s in zip(moved, new)]), _listed(events))
    d.call("list_events")
    for i, (day, hour) in zip(moved, new):
        e = events[i]
        d.call("cancel_event", ("id",), id=i)
        d.call("add_event", title=e["title"], day=day, hour=hour)
        d.after.append([event_item(e["title"], day, hour), event_item(e["title"], e["day"], e["hour"])])
    return d


def calendar_clear_day(rng, calls):
    day = rng.choice(DAYS)
    events = _calendar(rng, calls - 1 + rng.randint(2, 4), day, calls - 1)
    d = Draft(f"Cancel every event on {day}. Keep all other events.", _listed(events))
    d.call("list_events", day=day)
    for i in sorted(i for i, e in events.items() if e["day"] == day):
        d.call("cancel_event", ("id",), id=i)
    return d


def calendar_book(rng, calls):
    events = _calendar(rng, rng.randint(4, 7))
    clash = rng.sample(sorted(events), (calls - 1) // 2)
    titles = rng.sample([t for t in TITLES if t not in {e["title"] for e in events.values()}],
                        len(clash))
    d = Draft(_sentence([f"book a new event `{t}` on {_slot(events[i]['day'], events[i]['hour'])}"
                         for t, i in zip(titles, clash)],
                        ", cancelling whatever is booked at that time now."), _listed(events))
    d.call("list_events")
    for t, i in zip(titles, clash):
        e = events[i]
        d.call("cancel_event", ("id",), id=i)
        d.call("add_event", title=t, day=e["day"], hour=e["hour"])
        d.after.append([event_item(t, e["day"], e["hour"]), event_item(e["title"], e["day"], e["hour"])])
    return d


FILES = {"append": Combo((2, 4, 6), files_append), "merge": Combo((3, 4, 5, 6), files_merge),
         "find": Combo((3, 4, 5, 6), files_find)}
INVENTORY = {"restock": Combo((2, 4, 6), inventory_restock),
             "transfer": Combo((3, 6), inventory_transfer),
             "trim": Combo((2, 3, 4, 5, 6), inventory_trim)}
CALENDAR = {"reschedule": Combo((3, 5), calendar_reschedule),
            "clear_day": Combo((2, 3, 4, 5, 6), calendar_clear_day),
            "book": Combo((3, 5), calendar_book)}
