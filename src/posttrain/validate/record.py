"""What validation finds: one Check per probe (with its evidence) and the task's status.

Statuses, worst first: broken (cannot be used as is), flaky (the same answer does not
always get the same reward), hackable (a non-solution is rewarded), weak-verifier
(wrong solutions pass), ok.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

STATUSES = ("broken", "flaky", "hackable", "weak-verifier", "ok")
CHECK_ORDER = ("static", "leaks", "oracle", "nop", "instruction_files", "trivial",
               "determinism", "hacks", "mutation")


@dataclass
class Check:
    """passed: True/False; None when it could not run (skipped). `flags` is the status a
    failure gives the task; `evidence` is what was observed, kept in the manifest."""

    name: str
    passed: bool | None
    flags: str = "ok"
    reason: str = ""
    evidence: dict = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Check":
        return cls(d["name"], d["passed"], d.get("flags", "ok"), d.get("reason", ""),
                   d.get("evidence", {}), d.get("seconds", 0.0))


def skipped(name: str, reason: str) -> Check:
    return Check(name, None, reason=reason)


def task_status(checks: dict[str, Check]) -> tuple[str, list[str]]:
    """(worst status among failed checks, the reasons that led to it, then the errors of
    checks that could not judge, e.g. the mutation step's own)."""
    failed = [c for c in checks.values() if c.passed is False]
    unjudged = [f"{c.name}: {c.reason}" for c in checks.values()
                if c.passed is None and c.evidence.get("errors")]
    if not failed:
        return "ok", unjudged
    worst = min(failed, key=lambda c: STATUSES.index(c.flags)).flags
    return worst, [f"{c.name}: {c.reason}" for c in failed if c.flags == worst] + unjudged


@dataclass
class TaskReport:
    id: str
    path: str
    status: str
    reasons: list[str]
    checks: dict[str, Check]
    difficulty: dict | None = None
    metadata: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"id": self.id, "path": self.path, "status": self.status, "reasons": self.reasons,
                "checks": {k: c.to_dict() for k, c in self.checks.items()},
                "difficulty": self.difficulty, "metadata": self.metadata}
