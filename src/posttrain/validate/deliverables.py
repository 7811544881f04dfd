"""Mutants of deliverables: files the oracle created or changed that the verifier reads.

A probe run of the oracle snapshots /app and /tmp before and after it and traces which
changed files its verifier run reads (validate/reads.py); those are the deliverables.
Inputs the task ships and the oracle leaves alone, the oracle's own scratch files
(a helper solve.py the tests never open), and git's bookkeeping beside a repository's
content (INERT_GIT) are never mutated. Each mutant damages one
deliverable in a fresh sandbox after the real oracle ran there, and says how, with the diff.
"""

from __future__ import annotations

import difflib
import io
import os
import re
import tokenize
from dataclasses import dataclass

from posttrain.sandbox import Sandbox
from posttrain.validate.mutants import change_value, truncate
from posttrain.validate.runs import Snapshot, changed_files

# What each kind does, for the evidence. A new file gets `remove`, a changed one `revert`.
HOW = {"change_value": "change one value in the code or data the oracle wrote (a number, else an operator)",
       "truncate": "cut what the oracle wrote to its first half",
       "remove": "move the file away (the deliverable is missing)",
       "revert": "put back the file the task shipped (undo the oracle's change)"}
MAX_DIFF_LINES = 40
MIN_GIVEN = 12   # chars: a shorter line (`return x`) in the instruction is a coincidence
COMMENT_RE = re.compile(rb"^\s*(#|//|/\*|\*|--|;|<!--)")
FLIPS = {"+": "-", "-": "+", "<": ">=", ">": "<=", "<=": ">", ">=": "<", "==": "!=", "!=": "==",
         "True": "False", "False": "True", "and": "or", "or": "and"}


# Files in a .git directory that git writes or copies from its template but never reads to
# answer what a check can ask of commits, trees, refs or the work tree: the description
# (gitweb's), reflogs, the last commit message's scratch file, the sample hooks (never run),
# and the template's info/exclude (all comments; it only hides untracked files). A verifier
# that copies .git whole reads them, so the trace lists them, but no mutant of them can fail
# a sound verifier: each would survive and count against it.
INERT_GIT = re.compile(r"(^|/)\.git/(description|COMMIT_EDITMSG|logs/.+|hooks/[^/]+\.sample|info/exclude)$")


class NoChange(Exception):
    """The mutation leaves the deliverable as it was: not a mutant."""


def find(before: Snapshot, after: Snapshot, read: list[str]) -> list[str]:
    """The deliverables: changed files the verifier read, in snapshot order."""
    got = set(read)
    return [p for p in changed_files(before, after) if p in got and not INERT_GIT.search(p)]


def plan(deliverables: list[str], before: Snapshot, budget: int) -> list[tuple[str, str]]:
    """(kind, path) mutants, round robin over the deliverables so each gets its strongest
    mutants first when the budget is short."""
    per = [[(k, p) for k in ("change_value", "truncate", "revert" if p in before else "remove")]
           for p in deliverables]
    order = [m for rank in range(3) for ms in per for m in ms[rank:rank + 1]]
    return order[:budget]


def shipped(sandbox: Sandbox, path: str) -> bytes | None:
    """Before the oracle runs: the file as the task ships it (None when there is none)."""
    try:
        return _read(sandbox.host_path(path))
    except FileNotFoundError:
        return None


def apply(sandbox: Sandbox, kind: str, path: str, base: bytes | None, given: str = "") -> dict:
    """After the oracle: damage `path` (base: the shipped bytes, for revert and for aiming
    change_value at what the oracle wrote; given: the instruction). Returns the evidence."""
    sandbox.stop_all_but_servers()
    host = sandbox.host_path(path)
    if kind == "remove":
        os.rename(host, host.with_name(host.name + ".mutant"))
        return {"deliverable": path, "kind": kind, "how": HOW[kind],
                "diff": f"{path} moved to {path}.mutant"}
    old = _read(host)
    new = {"truncate": truncate, "revert": lambda d: base or b"",
           "change_value": lambda d: _change_aimed(path, d, base, given)}[kind](old)
    if new == old:
        raise NoChange(f"{kind} leaves {path} unchanged")
    fd = os.open(host, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
    with os.fdopen(fd, "wb") as f:
        f.write(new)
    return {"deliverable": path, "kind": kind, "how": HOW[kind], "diff": diff(path, old, new)}


def _read(host) -> bytes:
    fd = os.open(host, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _change_aimed(path: str, data: bytes, base: bytes | None, given: str = "") -> bytes:
    """change_value aimed at what the oracle wrote: only on lines it added or changed (all
    lines of a new file) that the instruction does not give verbatim (a helper it hands
    over is not the solver's work), never on a comment line; in Python, a number token
    (never one in a string or a docstring), else an operator flipped. A mutant of a
    docstring's example or of given code the tests never call proves nothing."""
    lines = data.splitlines(keepends=True)
    rows = [j for j in _new_rows(base, lines) if not _given(lines[j], given)] or \
        _new_rows(base, lines)
    if path.endswith(".py"):
        hit = _python_edit(lines, set(rows))
        return data if hit is None else hit      # no value in the code itself: no mutant
    for j in rows:
        if re.search(rb"[0-9A-Za-z]", lines[j]) and not COMMENT_RE.match(lines[j]):
            return b"".join(lines[:j]) + change_value(lines[j]) + b"".join(lines[j + 1:])
    return data


def _given(line: bytes, instruction: str) -> bool:
    text = line.decode("utf-8", "replace").strip()
    return len(text) >= MIN_GIVEN and text in instruction


def _new_rows(base: bytes | None, lines: list[bytes]) -> list[int]:
    if base is None:
        return list(range(len(lines)))
    ops = difflib.SequenceMatcher(None, base.splitlines(keepends=True), lines,
                                  autojunk=False).get_opcodes()
    return [j for tag, _, _, j1, j2 in ops if tag in ("replace", "insert") for j in range(j1, j2)]


def _python_edit(lines: list[bytes], rows: set[int]) -> bytes | None:
    try:
        toks = list(tokenize.tokenize(io.BytesIO(b"".join(lines)).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    hits = [t for t in toks if t.start[0] - 1 in rows and t.start[0] == t.end[0]]
    pick = next((t for t in hits if t.type == tokenize.NUMBER), None) or \
        next((t for t in hits if t.type in (tokenize.OP, tokenize.NAME) and t.string in FLIPS), None)
    if pick is None:
        return None
    row, (c0, c1) = pick.start[0] - 1, (pick.start[1], pick.end[1])
    text = lines[row].decode("utf-8")
    repl = change_value(pick.string.encode()).decode() if pick.type == tokenize.NUMBER \
        else FLIPS[pick.string]
    lines = lines[:row] + [(text[:c0] + repl + text[c1:]).encode("utf-8")] + lines[row + 1:]
    return b"".join(lines)


def diff(path: str, old: bytes, new: bytes) -> str:
    """A short unified diff of the deliverable, oracle's version first."""
    if b"\0" in old[:8192] + new[:8192]:
        return f"binary {path}: {len(old)} -> {len(new)} bytes"
    lines = list(difflib.unified_diff(old.decode("utf-8", "replace").splitlines(),
                                      new.decode("utf-8", "replace").splitlines(),
                                      f"{path} (oracle)", f"{path} (mutant)", n=1, lineterm=""))
    more = len(lines) - MAX_DIFF_LINES
    text = "\n".join(line[:200] for line in lines[:MAX_DIFF_LINES])
    return text + (f"\n... {more} more lines" if more > 0 else "")


@dataclass
class Target:
    """One planned mutant, with the hooks that apply it inside attempt()."""

    kind: str
    path: str
    given: str = ""     # the instruction

    @property
    def name(self) -> str:
        return f"{self.kind} {self.path}"

    def before(self, sandbox: Sandbox, _attempt) -> bytes | None:
        return shipped(sandbox, self.path) if self.kind in ("revert", "change_value") else None

    def after(self, sandbox: Sandbox, attempt) -> dict:
        return apply(sandbox, self.kind, self.path, attempt.extra, self.given)
