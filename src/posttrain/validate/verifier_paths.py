"""Which absolute paths a task's tests read, from their text.

A path the tests only write (a redirection, tee, mkdir, touch, the destination of cp or mv,
open(..., 'w')) is not an input, and a path in a comment is not read at all: Terminal-Bench's
shared run-tests.sh carries comments and dead branches for other languages ("merge test
sources into /app/src/**"). What is left is what the no-op, plant and mutation probes treat
as the files the verifier depends on.
"""

from __future__ import annotations

import re

from posttrain.tasks import Task

PATH_RE = re.compile(r"(?<![\w.$-])/(?:app|tmp|logs|home|root|srv|opt|data|workspace|mnt|var/tmp)"
                     r"(?:/[A-Za-z0-9._+-]+)*/?")
REDIRECT_RE = re.compile(r"(?:>>?|\btee\s+(?:-a\s+)?)\s*[\"']?(" + PATH_RE.pattern + ")")
OPEN_W_RE = re.compile(r"open\(\s*[\"'](/[^\"']+)[\"']\s*,\s*[\"'][wax]")
SEGMENT_RE = re.compile(r"&&|\|\||[;|\n]")
KEYWORDS = {"then", "do", "else", "sudo", "!"}
CREATORS = {"mkdir", "touch"}              # every path argument is made
COPIERS = {"cp", "mv", "install", "ln"}    # the last argument is written
SKIP_BYTES = 2_000_000


def tests_text(task: Task) -> str:
    parts = []
    for p in sorted(task.tests_dir.rglob("*")):
        if p.is_file() and not p.is_symlink() and p.stat().st_size < SKIP_BYTES:
            parts.append(p.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)


def without_comments(text: str) -> str:
    """Whole-line shell and Python comments dropped (a trailing one is kept: '#' also occurs in
    strings and URLs)."""
    return "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))


def _clean(path: str) -> str:
    return path.rstrip("/.")


def _command_writes(segment: str) -> list[str]:
    words = segment.split()
    while words and words[0] in KEYWORDS:
        words = words[1:]
    if not words:
        return []
    paths = [m.group(0) for m in PATH_RE.finditer(segment)]
    if words[0] in CREATORS:
        return paths
    last = words[-1].strip("\"'")
    if words[0] in COPIERS and paths and last == paths[-1]:
        return paths[-1:]
    return []


def written_paths(text: str) -> set[str]:
    """Paths the text writes or creates."""
    out = {m.group(1) for r in (REDIRECT_RE, OPEN_W_RE) for m in r.finditer(text)}
    for segment in SEGMENT_RE.split(text):
        out.update(_command_writes(segment))
    return {_clean(p) for p in out}


def referenced_paths(task: Task) -> list[str]:
    """Absolute paths in writable or data areas that the tests read (not the reward, and
    not paths the tests write themselves)."""
    text = without_comments(tests_text(task))
    found = {_clean(m.group(0)) for m in PATH_RE.finditer(text)}
    return sorted(p for p in found - written_paths(text) if p and not p.startswith("/logs/verifier")
                  and p not in ("/app", "/tmp", "/logs"))
