"""Long-context probes: a candidate sprayer and a no-context guesser.

The sprayer lists every answer-shaped string in the haystack (numbers, upper-case
names, function names, capitalised words, the rooms and ports vocabularies): it wins
on a containment scorer and must score 0 under the over-listing rule. The guesser
never reads the haystack: it answers with what the question itself offers (its
numbers, names and identifiers, at most two), which wins only when a task leaks its
answer into the question.
"""

from __future__ import annotations

import re

from posttrain.tasks import Task

CANDIDATE_RE = re.compile(r"\b(?:\d{2,6}|[A-Z]{5}|f_[a-z]+_[a-z]+_\d{3}|[A-Z][a-z]{2,})\b")
LOWER_VOCAB = re.compile(r"\b(?:kitchen|garden|hallway|bathroom|bedroom|office|cellar|attic)\b")


def _haystack(task: Task) -> str:
    parts = [task.instruction]
    app = task.environment_dir / "app"
    if app.is_dir():
        parts += [p.read_text(errors="replace") for p in sorted(app.rglob("*")) if p.is_file()]
    return "\n".join(parts)


def _write(items: list[str]) -> str:
    text = "\n".join(items) or "none"
    return f"cat > /app/answer.txt <<'PROBE_EOF'\n{text}\nPROBE_EOF\n"


def sprayer(task: Task) -> str:
    text = _haystack(task)
    found = CANDIDATE_RE.findall(text) + LOWER_VOCAB.findall(text)
    return _write(list(dict.fromkeys(found)))


def question(task: Task) -> str:
    m = re.search(r"Question: (.*)", task.instruction)
    return m.group(1) if m else task.instruction.strip().splitlines()[-1]


def no_context_guesser(task: Task) -> str:
    q = re.sub(r"pkg\.mod_\d+\.", "", question(task))
    return _write(CANDIDATE_RE.findall(q)[-2:])


def _items(task: Task) -> list[str]:
    import json

    return json.loads((task.tests_dir / "expected.json").read_text())["items"]


def half_recall(task: Task) -> str:
    """Finds only half of the answer items (at least one)."""
    items = _items(task)
    return _write(items[:max(1, len(items) // 2)])


def with_distractors(task: Task) -> str:
    """The whole answer plus as many wrong candidates from the haystack."""
    items = _items(task)
    wrong = [c for c in CANDIDATE_RE.findall(_haystack(task)) if c not in items]
    return _write(items + list(dict.fromkeys(wrong))[:len(items)])


# Scripted partial agents (not probes): what they score shows how the reward grades.
PARTIAL = {"half_recall": half_recall, "with_distractors": with_distractors}

PROBES = {"sprayer": sprayer, "no_context_guesser": no_context_guesser}
