"""A reviewer at the terminal: each matched command is shown and waits for y or n (and a reason).

Episodes run their commands in threads, so one lock keeps one question on the screen at a time.
The terminal waits for an answer (no timeout: a person is there); a closed terminal denies.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from posttrain.agent.approval import ApprovalRequest, Decision

QUESTION = "allow? [y/n] (a reason may follow, e.g. `n too risky`): "


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
    def __init__(self, inp: TextIO, out: TextIO):
        self.inp, self.out = inp, out
        self.lock = threading.Lock()

    @classmethod
    def from_tty(cls) -> "TerminalApprover":
        """The controlling terminal (so a redirected stdout still asks), else stdin/stdout."""
        try:
            return cls(open("/dev/tty", encoding="utf-8"), open("/dev/tty", "w", encoding="utf-8"))
        except OSError:
            return cls(sys.stdin, sys.stdout)

    def close(self) -> None:
        for stream in (self.inp, self.out):
            if stream not in (sys.stdin, sys.stdout):
                stream.close()

    def decide(self, request: ApprovalRequest) -> Decision:
        with self.lock:
            self.out.write(describe(request))
            while True:
                self.out.write(QUESTION)
                self.out.flush()
                line = self.inp.readline()
                if not line:
                    return Decision(False, "the terminal closed before an answer", "terminal")
                if (decision := parse_answer(line)) is not None:
                    self.out.write(f"  {'allowed' if decision.allow else 'denied'}\n")
                    self.out.flush()
                    return decision
