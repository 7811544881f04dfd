"""Record the literal-valued calls a test suite makes to chosen functions (a child process).

Run at generation time as `python -I record.py SPEC.json`: it puts the verifier's
pytest and the pristine tree on its path, traces calls to the named functions while the
tests run, and writes the calls whose arguments are plain literals (numbers, strings,
None and lists, tuples, dicts of them) as reprs that ast.literal_eval reads back. The
code suite turns them, and perturbed copies, into hidden differential cases.
"""

from __future__ import annotations

import ast
import json
import math
import sys

MAX_CALLS = 40
MAX_ITEMS = 30
VARARGS, VARKEYWORDS = 0x04, 0x08


def literal(value, depth: int = 0) -> bool:
    """True if value is a small plain literal that survives repr -> literal_eval."""
    if depth > 3:
        return False
    if isinstance(value, bool) or value is None or isinstance(value, (int, str, bytes)):
        return not isinstance(value, (str, bytes)) or len(value) <= 200
    if isinstance(value, float):
        return math.isfinite(value)
    if type(value) in (list, tuple):
        return len(value) <= MAX_ITEMS and all(literal(v, depth + 1) for v in value)
    if type(value) is dict:
        return len(value) <= MAX_ITEMS and all(literal(k, depth + 1) and literal(v, depth + 1)
                                               for k, v in value.items())
    return False


def call_of(frame) -> tuple[str, str] | None:
    """(args repr, kwargs repr) of the call a frame has just entered, if all literal."""
    code, local = frame.f_code, frame.f_locals
    names = code.co_varnames
    n_pos, n_kw = code.co_argcount, code.co_kwonlyargcount
    args = [local[n] for n in names[:n_pos]]
    kwargs = {n: local[n] for n in names[n_pos:n_pos + n_kw]}
    i = n_pos + n_kw
    if code.co_flags & VARARGS:
        args += list(local[names[i]])
        i += 1
    if code.co_flags & VARKEYWORDS:
        kwargs |= dict(local[names[i]])
    if not (literal(args) and literal(kwargs)):
        return None
    text = (repr(tuple(args)), repr(kwargs))
    try:
        ok = ast.literal_eval(text[0]) == tuple(args) and ast.literal_eval(text[1]) == kwargs
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return text if ok else None


def record(spec: dict) -> dict[str, list[list[str]]]:
    import importlib

    sys.path[:0] = [*spec["wheels"], spec["work"]]
    targets = {}
    for qual in spec["functions"]:
        module, _, name = qual.partition(":")
        func = getattr(importlib.import_module(module), name, None)
        code = getattr(func, "__code__", None)
        if code is not None:
            targets[code] = qual
    calls: dict[str, dict[tuple[str, str], None]] = {q: {} for q in targets.values()}

    def hook(frame, event, arg):
        if event == "call" and frame.f_code in targets:
            seen = calls[targets[frame.f_code]]
            if len(seen) < MAX_CALLS:
                got = call_of(frame)
                if got:
                    seen.setdefault(got)

    import pytest

    sys.setprofile(hook)
    try:
        pytest.main(["-q", "-p", "no:cacheprovider", "--noconftest", "--rootdir", spec["work"],
                     "-c", spec["ini"], *spec["targets"]])
    finally:
        sys.setprofile(None)
    return {q: [list(c) for c in seen] for q, seen in calls.items()}


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    result = record(spec)
    with open(spec["out"], "w") as f:
        json.dump(result, f)
