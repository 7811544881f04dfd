"""A reply's reward under its task's constraints, by IFEval's checkers as if-verifiable 0.1.2
ships them (`evaluate_instructions`, strict mode): the fraction of constraints met, and
whether all were. Pure text in, numbers out: a reply is never run, so no sandbox is needed.

langdetect (used by the case checkers) samples at random unless seeded: seeded here, so the
same reply always gets the same reward.
"""

from __future__ import annotations

from typing import NamedTuple

from langdetect import DetectorFactory

DetectorFactory.seed = 0

from if_verifiable.common import evaluate_instructions  # noqa: E402
from if_verifiable.ifeval import INSTRUCTION_DICT  # noqa: E402

CHECKER = "if-verifiable==0.1.2 (IFEval checkers, strict)"


class Score(NamedTuple):
    partial: float        # fraction of constraints met
    strict: bool          # all met
    met: list[bool]       # one per constraint, in order


def score(constraints: list[dict], reply: str, prompt: str = "") -> Score:
    """constraints: [{"id": checker id, "kwargs": {...}}, ...] as a task's metadata holds them."""
    ids = [c["id"] for c in constraints]
    results, scores = evaluate_instructions(reply, ids, [c.get("kwargs", {}) for c in constraints],
                                            prompt, INSTRUCTION_DICT)
    met = [r.strict_pass for r in results] or [False] * len(ids)
    return Score(scores.partial_strict, bool(scores.binary_strict), met)


def score_reply(metadata: dict, reply: str) -> tuple[float, dict[str, float]]:
    """(reward = partial, {"strict": 0/1, "met:FAMILY": 0/1 ...}) for one task's metadata."""
    s = score(metadata["constraints"], reply)
    details = {"strict": float(s.strict)}
    details |= {f"met:{f}": float(m) for f, m in zip(metadata.get("families", []), s.met)}
    return s.partial, details


def describe(checker: str, kwargs: dict) -> str:
    """The checker's own wording of the constraint (IFEval's), for the prompt."""
    return INSTRUCTION_DICT[checker](checker).build_description(**kwargs)
