"""The exactly-once group ledger: where every group the sampler issued is now.

Each uid is in exactly one state: `issued` (claimed, not yet running), `in_flight` (a wave is
running it), `buffered` (finished, waiting for the trainer), `trained` (in an optimizer step)
or `dropped` (with a reason: `filtered` at put, `stale` at take). A group that a lost worker
was running goes back to `issued` and its `attempts` count goes up. Marking a group trained
twice raises `LedgerError`: the run stops rather than train on it again. The ledger is saved
with the checkpoint; on restore every group that was issued or in flight is `issued` again
(the sampler re-queues them with the same uid and seed), so nothing is lost on a restart.

API (small on purpose; the scheduler may use it): issue, start, buffer, train, drop, requeue,
state(uid), counts(), audit(outstanding), state_dict(), load_state_dict().
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass

STATES = ("issued", "in_flight", "buffered", "trained", "dropped")
TERMINAL = ("trained", "dropped")


class LedgerError(RuntimeError):
    """A group would be counted twice (trained twice, or moved from a final state)."""


@dataclass
class Entry:
    task_id: str
    state: str = "issued"
    reason: str = ""        # why it was dropped, or why it was issued again
    attempts: int = 1       # times a wave started it (> 1 after a lost worker)
    step: int = -1          # the optimizer step that trained it


class GroupLedger:
    def __init__(self):
        self.entries: dict[int, Entry] = {}

    def _move(self, uid: int, to: str, allowed: tuple[str, ...], reason: str = "") -> Entry:
        entry = self.entries.get(uid)
        if entry is None:
            raise LedgerError(f"group {uid} was never issued")
        if entry.state not in allowed:
            raise LedgerError(f"group {uid} cannot go from {entry.state} to {to}")
        entry.state, entry.reason = to, reason or entry.reason
        return entry

    def issue(self, uid: int, task_id: str) -> None:
        """A new group, or a re-queued one (after a restart) handed out again."""
        entry = self.entries.get(uid)
        if entry is None:
            self.entries[uid] = Entry(task_id)
        elif entry.state != "issued":
            raise LedgerError(f"group {uid} issued again while {entry.state}")

    def start(self, uid: int) -> None:
        self._move(uid, "in_flight", ("issued", "in_flight"))

    def requeue(self, uid: int, reason: str) -> None:
        """The wave running the group was lost; it will run again."""
        entry = self._move(uid, "issued", ("issued", "in_flight"), reason)
        entry.attempts += 1

    def buffer(self, uid: int) -> None:
        self._move(uid, "buffered", ("in_flight",))

    def train(self, uid: int, step: int) -> None:
        entry = self.entries.get(uid)
        if entry is not None and entry.state == "trained":
            raise LedgerError(f"group {uid} was already trained at step {entry.step}")
        self._move(uid, "trained", ("buffered",)).step = step

    def drop(self, uid: int, reason: str) -> None:
        self._move(uid, "dropped", ("in_flight", "buffered"), reason)

    def state(self, uid: int) -> str | None:
        entry = self.entries.get(uid)
        return entry.state if entry else None

    def counts(self) -> dict[str, int]:
        """Groups per state, and dropped groups per reason (`dropped_<reason>`)."""
        c = Counter(e.state for e in self.entries.values())
        c.update(f"dropped_{e.reason}" for e in self.entries.values() if e.state == "dropped")
        return {s: c.get(s, 0) for s in STATES} | {k: v for k, v in c.items() if k.startswith("dropped_")}

    def audit(self, outstanding: set[int]) -> dict:
        """Groups lost: neither final nor held by anyone (`outstanding`: uids the pipeline
        holds in flight, in the buffer or re-queued). `reissued`: groups run more than once."""
        lost = sorted(u for u, e in self.entries.items() if e.state not in TERMINAL and u not in outstanding)
        return {"lost": lost, "reissued": sum(e.attempts > 1 for e in self.entries.values()),
                **self.counts()}

    def state_dict(self) -> dict:
        return {str(u): asdict(e) for u, e in sorted(self.entries.items())}

    def load_state_dict(self, state: dict) -> None:
        """Restore; groups that were issued or in flight are issued again (re-queued)."""
        self.entries = {int(u): Entry(**e) for u, e in state.items()}
        for e in self.entries.values():
            if e.state == "in_flight":
                e.state, e.reason = "issued", "restart"
