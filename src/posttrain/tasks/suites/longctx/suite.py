"""The `longctx` suite: retrieval and reasoning over a haystack grown to a token budget.

Families: needle, multikey, multivalue, nolex (no content word shared with the
needle), vartrack, babi, aggregate (several documents), code_exec and code_callers
(a generated package). Mode `files` puts the haystack under /app; mode
`instruction` puts it in the instruction. The agent lists the answer items in
/app/answer.txt; `setscore.py` scores F1 with the over-listing rule.
"""

from __future__ import annotations

import random
import re

from pydantic import Field, field_validator

from posttrain.config_base import StrictModel
from posttrain.tasks.suites import scored
from posttrain.tasks.suites.longctx import codegen, families, setscore
from posttrain.tasks.suites.longctx.haystack import Counter, filler, insert, paragraphs
from posttrain.tasks.task import Task

SUITE = "longctx"
CODE = {"code_exec": codegen.code_exec, "code_callers": codegen.code_callers}
ALL = list(families.FAMILIES) + list(CODE)
LEVEL = {"needle": "easy", "babi": "easy", "multikey": "medium", "multivalue": "medium",
         "nolex": "medium", "aggregate": "medium", "vartrack": "hard", "code_exec": "hard",
         "code_callers": "hard"}


class Knobs(StrictModel):
    tokens: int = Field(4000, ge=500, le=131_072)
    mode: str = Field("files", pattern="^(files|instruction)$")
    tokenizer: str = "approx"          # or a directory/file with tokenizer.json
    families: str = ",".join(ALL)

    @field_validator("families")
    @classmethod
    def _known(cls, v: str) -> str:
        return scored.known_families(v, ALL)


def _haystack(rng, probe, k: Knobs, count) -> dict[str, str]:
    """{relative path: text} of the haystack for a text family."""
    lines = probe.needles + [ln for doc in probe.documents.values() for ln in doc]
    budget = max(100, k.tokens - sum(count(" " + n) for n in lines) - 150)
    if probe.documents:
        per = budget // len(probe.documents)
        return {f"docs/{name}": paragraphs(insert(filler(rng, per, count), lines, rng), rng)
                for name, lines in probe.documents.items()}
    return {"haystack.txt": paragraphs(insert(filler(rng, budget, count), probe.needles, rng), rng)}


def _leaks(question: str, items: list[str]) -> bool:
    words = set(re.findall(r"[\w.]+", question.lower()))
    return any(setscore.normalize(i) in words for i in items)


def _draw(rng, family: str, k: Knobs, count):
    for _ in range(50):
        if family in CODE:
            pkg = codegen.build_package(rng, k.tokens - 150, count)
            question, items = CODE[family](rng, pkg)
            files = pkg.sources()
        else:
            probe = families.FAMILIES[family](rng)
            question, items = probe.question, probe.items
            files = _haystack(rng, probe, k, count)
        if not _leaks(question, items):
            return question, items, files
    raise RuntimeError(f"longctx: every {family} draw leaked its answer into the question")


def _instruction(question: str, files: dict[str, str], mode: str) -> str:
    tail = ("\n\nQuestion: " + question + "\n\nWrite the answer to /app/answer.txt, one item per "
            "line. Scored by F1 over the items; listing more than twice as many items as the "
            "answer has scores 0.")
    if mode == "files":
        where = ("the Python package in /app/pkg" if "pkg/__init__.py" in files else
                 "the documents in /app/docs" if any(p.startswith("docs/") for p in files)
                 else "the text in /app/haystack.txt")
        return f"Read {where}." + tail
    body = "\n".join(f"===== {path} =====\n{text}" for path, text in files.items())
    return "Read the material below.\n\n" + body + tail


def make_task(task_id, family, question, items, files, k: Knobs, count) -> Task:
    inst = _instruction(question, files, k.mode)
    measured = count(inst) + (sum(count(t) for t in files.values()) if k.mode == "files" else 0)
    return scored.answer_task(
        task_id, domain=SUITE, family=family, difficulty=LEVEL[family], instruction=inst,
        app_files=files if k.mode == "files" else {},
        answer=scored.write_answer("\n".join(items)), scorer=scored.module_source(setscore),
        expected={"items": items, "family": family},
        knobs={"tokens": k.tokens, "tokens_measured": measured, "mode": k.mode,
               "tokenizer": k.tokenizer if k.tokenizer == "approx" else "file"},
        steps=["ls -R /app | head", "printf '%s\\n' " + " ".join(f"'{i}'" for i in items)
               + " > /app/answer.txt"])


def build(n: int, seed: int, split: str, knobs: Knobs | None) -> list[Task]:
    k = knobs or Knobs()
    count = Counter(k.tokenizer)
    names = k.families.split(",")
    rng = random.Random(f"{SUITE}/{split}/{seed}")
    tasks = []
    for i in range(n):
        family = names[i % len(names)]
        question, items, files = _draw(rng, family, k, count)
        tasks.append(make_task(f"{split}-{i:04d}-{family}", family, question, items, files, k, count))
    return tasks
