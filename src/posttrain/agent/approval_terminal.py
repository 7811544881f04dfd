"""A reviewer at the terminal: each matched command is shown and waits for y or n (and a reason).

Episodes run their commands in threads, so one lock keeps one question on the screen at a time.
The terminal waits for an answer (no timeout: a person is there). A closed terminal denies, and
`cancel()` (the run is ending, e.g. on Ctrl-C: the loop calls it) denies the questions waiting.
"""

from __future__ import annotations

import os
import select
import sys
import threading
from typing import BinaryIO, TextIO

from posttrain.agent.approval import ApprovalRequest, Decision

QUESTION = "allow? [y/n] (a reason may follow, e.g. `n too risky`): "
POLL_S = 0.2    # how soon a cancel is seen while a question waits


def describe(request: ApprovalRequest) -> str:
    return (f"\n[approval] {request.task_id} (attempt {request.group_id}, slot {request.slot}) "
            f"turn {request.turn} wants to run:\n    {request.command}\n"
            f"  matched rule: {request.rule}\n")


def parse_answer(line: str) -> Decision | None:
    """`y [reason]` or `n [reason]` (also yes/no, any case); None for anything else."""
    word, _, reason = line.strip().partition(" ")
    if word.lower() in ("y", "yes"):
        return Decision(True, reason.strip(), "terminal")
    if word.lower() in ("n", "no"):
        return Decision(False, reason.strip() or "denied at the terminal", "terminal")
    return None


class TerminalApprover:
    def __init__(self, inp: BinaryIO | TextIO, out: TextIO):
        """inp: anything with a fileno(), read with os.read (a buffered reader would hold typed
        lines where select cannot see them)."""
        self.inp, self.out = inp, out
        self.typed = b""        # read but not yet a whole line
        self.lock = threading.Lock()
        self.generation = 0     # cancel() moves it on: a question of an earlier one is denied

    @classmethod
    def from_tty(cls) -> "TerminalApprover":
        """The controlling terminal (so a redirected stdout still asks), else stdin/stdout."""
        try:
            return cls(open("/dev/tty", "rb", buffering=0), open("/dev/tty", "w", encoding="utf-8"))
        except OSError:
            return cls(sys.stdin, sys.stdout)

    def close(self) -> None:
        for stream in (self.inp, self.out):
            if stream not in (sys.stdin, sys.stdout):
                stream.close()

    def cancel(self) -> None:
        self.generation += 1

    def decide(self, request: ApprovalRequest) -> Decision:
        asked_in = self.generation
        with self.lock:
            if asked_in != self.generation:
                return Decision(False, "the run ended before an answer", "cancelled")
            self.out.write(describe(request))
            while True:
                self.out.write(QUESTION)
                self.out.flush()
                line = self._read_line(asked_in)
                if line is None:
                    return Decision(False, "the run ended before an answer", "cancelled")
                if not line:
                    return Decision(False, "the terminal closed before an answer", "terminal")
                if (decision := parse_answer(line)) is not None:
                    self.out.write(f"  {'allowed' if decision.allow else 'denied'}\n")
                    self.out.flush()
                    return decision

    def _read_line(self, asked_in: int) -> str | None:
        """The next line typed ("" at end of input), or None once cancel() is called."""
        fd = self.inp.fileno()
        while b"\n" not in self.typed:
            if asked_in != self.generation:
                return None
            if select.select([fd], [], [], POLL_S)[0]:
                chunk = os.read(fd, 4096)
                if not chunk:       # end of input: what is left, then ""
                    line, self.typed = self.typed, b""
                    return line.decode("utf-8", errors="replace")
                self.typed += chunk
        line, _, self.typed = self.typed.partition(b"\n")
        return line.decode("utf-8", errors="replace") + "\n"
