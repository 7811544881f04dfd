"""What a Terminal-Bench 1 task means that a plain copy would lose: keystroke solutions
(solution.yaml) and heredoc COPY in Dockerfiles.

- solution.yaml lists what TB1 typed into a tmux pane: `command` text, with Enter
  appended unless `append_enter` is false. Here the keystrokes become one stream fed to
  bash on stdin, so a program a keystroke starts (a REPL, `cat > file`) reads the
  keystrokes that follow, as it did in the terminal. tmux key names map to their bytes
  (Enter, C-m, C-j: newline; Tab; C-d ends the stream); other keys (C-c, Escape) are
  dropped with a comment, since a stream cannot interrupt.
- `COPY <<NAME dest` heredocs need BuildKit; the importer writes each heredoc body into
  the build context and turns the line into a plain COPY, which every builder runs.
"""

from __future__ import annotations

import re
from pathlib import Path

from posttrain.errors import TaskError

KEYS = {"Enter": "\n", "C-m": "\n", "C-j": "\n", "KPEnter": "\n", "Tab": "\t", "Space": " "}
HEREDOC_RE = re.compile(r"^(COPY|ADD)\s+((?:--\S+\s+)*)<<-?(['\"]?)(\w+)\3\s+(\S+)\s*$", re.I)


def keystrokes(steps: list) -> tuple[str, list[str] | None]:
    """(the keystroke stream, the commands as agent turns when each is one whole line)."""
    stream, turns = [], []
    for step in steps:
        command = step.get("command", "") if isinstance(step, dict) else str(step)
        enter = step.get("append_enter", True) if isinstance(step, dict) else True
        if command == "C-d":            # ends a program's input: not plain shell turns
            turns = None
            break
        if command in KEYS:
            stream.append(KEYS[command])
            turns = None
            continue
        if re.fullmatch(r"(C|M)-\S|Escape|BSpace|Up|Down|Left|Right", command):
            stream.append(f"\n# (key {command} dropped: a stream cannot send it)\n")
            turns = None
            continue
        stream.append(command + ("\n" if enter else ""))
        if turns is not None and enter and command.strip():
            turns.append(command)
        elif turns is not None and not enter:
            turns = None
    return "".join(stream), turns


def expand_heredocs(dockerfile: Path) -> None:
    """Rewrite `COPY <<EOF dest ... EOF` as a context file plus a plain COPY, in place."""
    lines = dockerfile.read_text(encoding="utf-8").splitlines(keepends=True)
    out, i, n = [], 0, 0
    while i < len(lines):
        m = HEREDOC_RE.match(lines[i].strip())
        if not m:
            out.append(lines[i])
            i += 1
            continue
        word, flags, _, marker, dest = m.groups()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == marker), None)
        if end is None:
            raise TaskError(f"{dockerfile}: heredoc <<{marker} is never closed")
        n += 1
        name = f".posttrain-heredoc-{n}"
        (dockerfile.parent / name).write_text("".join(lines[i + 1:end]))
        out.append(f"{word.upper()} {flags}{name} {dest}\n")
        i = end + 1
    if n:
        dockerfile.write_text("".join(out))
