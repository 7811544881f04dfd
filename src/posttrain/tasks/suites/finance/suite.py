"""The `finance` suite: questions over long 10-K-style reports of simulated companies.

Each task puts one report (two to four for `aggregate`) under /app/reports and asks
one question whose answer is a number and a unit, written to /app/answer.txt. The
verifier is `comparator.py` (strict: unit, sign and a stated tolerance; nothing is
evaluated). A question is redrawn while an unrelated printed number or its own
sign, scale or period perturbation lies near the answer.
"""

from __future__ import annotations

import random

from pydantic import Field, field_validator

from posttrain.config_base import StrictModel
from posttrain.tasks.suites import scored
from posttrain.tasks.suites.finance import comparator
from posttrain.tasks.suites.finance.ledger import simulate
from posttrain.tasks.suites.finance.questions import FAMILIES, LEVEL, acceptable, pick_wrong
from posttrain.tasks.suites.finance.render import render
from posttrain.tasks.task import Task

SUITE = "finance"
NAMES = ("Aldergrove", "Brightwater", "Castlemont", "Dunmore", "Everly", "Fairhaven", "Glenrock",
         "Harrowgate", "Ironbridge", "Juniper", "Kestrel", "Larkspur", "Millbrook", "Northwind")
SUFFIXES = ("Industries Inc.", "Holdings Corp.", "Systems Inc.", "Group plc", "Technologies Inc.")
SEGMENTS = ("Industrial", "Software", "Services", "Consumer", "Energy", "Healthcare", "Logistics")
MAX_TRIES = 50


class Knobs(StrictModel):
    tokens: int = Field(4000, ge=1000, le=200_000)   # report length (chars / 4)
    years: int = Field(4, ge=3, le=8)                 # fiscal years in each report
    docs: int = Field(2, ge=2, le=4)                  # reports in an aggregate task
    families: str = ",".join(FAMILIES)               # comma-separated, cycled in order

    @field_validator("families")
    @classmethod
    def _known(cls, v: str) -> str:
        return scored.known_families(v, FAMILIES)


def _company(rng: random.Random, name: str, first: int, years: int):
    segs = rng.sample(SEGMENTS, rng.randint(2, 4))
    return simulate(rng, f"{name} {rng.choice(SUFFIXES)}", segs, first, years)


def _draw(rng: random.Random, family: str, k: Knobs):
    """(question, reports), redrawn until acceptable."""
    for _ in range(MAX_TRIES):
        n_docs = k.docs if family == "aggregate" else 1
        names = rng.sample(NAMES, n_docs)
        first = rng.randint(2015, 2021)
        companies = [_company(rng, n, first, k.years) for n in names]
        wrong = pick_wrong(rng, companies[0]) if family == "inconsistency" else None
        per_doc = k.tokens // n_docs
        reports = [render(c, rng, per_doc, wrong if i == 0 else None) for i, c in enumerate(companies)]
        q = FAMILIES[family](rng, reports, wrong=wrong)
        if acceptable(q, reports):
            return q, reports
    raise RuntimeError(f"finance: no acceptable {family} question in {MAX_TRIES} draws")


def _instruction(q, reports) -> str:
    files = ", ".join(f"/app/{r.path}" for r in reports)
    example = "-1,234.5" if q.unit != "x" else "1.25"
    return (f"Read the annual report{'s' if len(reports) > 1 else ''} in {files}.\n\n"
            f"{q.text}\n\nWrite the answer to /app/answer.txt as one line: the number, a space, "
            f"and the unit `{q.unit}` (for example `{example} {q.unit}`). A negative answer has a "
            f"leading minus. It is accepted if the unit and sign match and it is within "
            f"±{q.tolerance:g} {q.unit} of the exact value computed from the figures in the "
            f"report{'s' if len(reports) > 1 else ''} (statements are in thousands of U.S. dollars).")


def _digits(q) -> str:
    return f"{q.value:.{2 if q.unit != 'x' else 3}f}"


def make_task(task_id: str, q, reports, k: Knobs) -> Task:
    answer = f"{_digits(q)} {q.unit}"
    expected = {"value": q.value, "unit": q.unit, "tolerance": q.tolerance,
                "period_value": q.period_value, "family": q.family}
    return scored.answer_task(
        task_id, domain=SUITE, family=q.family, difficulty=LEVEL[q.family],
        instruction=_instruction(q, reports), app_files={r.path: r.text for r in reports},
        answer=scored.write_answer(answer), scorer=scored.module_source(comparator),
        expected=expected, knobs={"tokens": k.tokens, "docs": len(reports), "years": k.years},
        steps=[f"grep -n 'fiscal' /app/{reports[0].path} | head -50",
               f"echo '{answer}' > /app/answer.txt"])


def build(n: int, seed: int, split: str, knobs: Knobs | None) -> list[Task]:
    k = knobs or Knobs()
    names = k.families.split(",")
    rng = random.Random(f"{SUITE}/{split}/{seed}")
    tasks = []
    for i in range(n):
        family = names[i % len(names)]
        q, reports = _draw(rng, family, k)
        tasks.append(make_task(f"{split}-{i:04d}-{family}", q, reports, k))
    return tasks
