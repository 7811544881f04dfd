"""Questions compiled from small programs over the simulated ledger.

Each family returns a Question: the exact value (from whole-dollar ledger amounts),
its unit and tolerance, the quantity keys whose printed numbers legitimately show
the answer, and the same program run one period earlier (the period perturbation).
`acceptable` rejects a question when an unrelated printed number, or the answer's own
sign, scale or period perturbation, lies within 3 tolerances of the answer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from posttrain.tasks.suites.finance.ledger import Company
from posttrain.tasks.suites.finance.render import LABELS, Report

MONEY, PCT, X = "USD millions", "%", "x"
TOL = {MONEY: 0.05, PCT: 0.1, X: 0.01}
LEVEL = {"lookup": "easy", "growth": "medium", "margin": "medium", "ratio": "medium",
         "xref": "medium", "cagr": "hard", "aggregate": "hard", "inconsistency": "hard"}


@dataclass
class Question:
    family: str
    text: str
    value: float
    unit: str
    period_value: float | None
    sources: set[str] = field(default_factory=set)

    @property
    def tolerance(self) -> float:
        return TOL[self.unit]


def _m(c: Company, key: str, year: int) -> int:
    return c.metrics[year][key]


def lookup(rng, reports, **_) -> Question:
    c = reports[0].company
    key = rng.choice(["revenue", "gross_profit", "operating_income", "net_income", "cash",
                      "inventory", "total_assets", "total_debt", "total_equity", "payables"])
    year = rng.choice(c.years[1:])
    srcs = {f"is:{key}:{year}", f"bs:{key}:{year}", f"note:{key}:{year}", f"mdna:{key}:{year}"}
    return Question("lookup", f"What was {c.name}'s {LABELS.get(key, 'total debt').lower()} "
                    f"in fiscal {year}?", _m(c, key, year) / 1e6, MONEY,
                    _m(c, key, year - 1) / 1e6, srcs)


def _growth(c, key, year):
    return (_m(c, key, year) / _m(c, key, year - 1) - 1) * 100


def growth(rng, reports, **_) -> Question:
    c = reports[0].company
    key = rng.choice(["gross_profit", "sga", "rd", "total_assets", "inventory", "receivables"])
    year = rng.choice(c.years[2:])
    return Question("growth", f"By what percentage did {c.name}'s {LABELS[key].lower()} change "
                    f"from fiscal {year - 1} to fiscal {year}?", _growth(c, key, year), PCT,
                    _growth(c, key, year - 1))


def margin(rng, reports, **_) -> Question:
    c = reports[0].company
    key = rng.choice(["gross_profit", "operating_income", "net_income", "rd", "sga"])
    year = rng.choice(c.years[1:])
    f = lambda y: _m(c, key, y) / _m(c, "revenue", y) * 100
    return Question("margin", f"What was {c.name}'s {LABELS[key].lower()} as a percentage of "
                    f"revenue in fiscal {year}?", f(year), PCT, f(year - 1))


def ratio(rng, reports, **_) -> Question:
    c = reports[0].company
    kind = rng.choice(["current", "leverage"])
    num, den, name = (("current_assets", "current_liabilities", "current ratio (total current "
                       "assets divided by total current liabilities)") if kind == "current" else
                      ("total_debt", "total_equity", "ratio of total debt to total stockholders' equity"))
    year = rng.choice(c.years[1:])
    f = lambda y: _m(c, num, y) / _m(c, den, y)
    return Question("ratio", f"What was {c.name}'s {name} at the end of fiscal {year}?",
                    f(year), X, f(year - 1))


def cagr(rng, reports, **_) -> Question:
    c = reports[0].company
    key = rng.choice(["revenue"] + [f"revenue:{s}" for s in c.segments])
    first, last = c.years[0], c.years[-1]
    f = lambda a, b: ((_m(c, key, b) / _m(c, key, a)) ** (1 / (b - a)) - 1) * 100
    what = "revenue" if key == "revenue" else f"{key.split(':')[1]} segment revenue"
    return Question("cagr", f"What was the compound annual growth rate of {c.name}'s {what} from "
                    f"fiscal {first} to fiscal {last}?", f(first, last), PCT, f(first, last - 1))


def xref(rng, reports, **_) -> Question:
    c = reports[0].company
    seg = rng.choice(c.segments)
    year = rng.choice(c.years[1:])
    f = lambda y: _m(c, f"revenue:{seg}", y) / _m(c, "revenue", y) * 100
    return Question("xref", f"Using the segment note and the statement of operations, what share "
                    f"of {c.name}'s total revenue in fiscal {year} came from its {seg} segment?",
                    f(year), PCT, f(year - 1))


def aggregate(rng, reports, **_) -> Question:
    key = rng.choice(["revenue", "net_income", "total_debt", "cash"])
    year = rng.choice(reports[0].company.years[1:])
    names = " and ".join(r.company.name for r in reports)
    f = lambda y: sum(_m(r.company, key, y) for r in reports) / 1e6
    label = LABELS.get(key, "total debt").lower()
    srcs = {f"{t}:{key}:{year}" for t in ("is", "bs", "note", "mdna")}
    return Question("aggregate", f"What was the combined {label} of {names} in fiscal {year}?",
                    f(year), MONEY, f(year - 1), srcs if len(reports) == 1 else set())


def inconsistency(rng, reports, wrong=None, **_) -> Question:
    r = reports[0]
    key, year, shown = wrong
    diff = lambda y: r.mdna[f"{key}:{y}"] - _m(r.company, key, y) / 1e6
    return Question("inconsistency", f"One figure in the MD&A of {r.company.name}'s report "
                    "contradicts the audited financial statements. What is the MD&A figure minus "
                    "the figure in the statements?", diff(year), MONEY, diff(year - 1))


FAMILIES = {f.__name__: f for f in (lookup, growth, margin, ratio, xref, cagr, aggregate, inconsistency)}


def acceptable(q: Question, reports: list[Report]) -> bool:
    """False when a printed unrelated number or a perturbation lies within 3 tolerances."""
    near = 3 * q.tolerance
    a = q.value
    if abs(a) <= near:
        return False
    perturbed = [-a, a * 1000, a / 1000] + ([q.period_value] if q.period_value is not None else [])
    if any(abs(p - a) <= near for p in perturbed):
        return False
    for r in reports:
        for shown, key in r.numbers:
            if key in q.sources:
                continue
            if abs(shown - a) <= near or (q.unit == MONEY and abs(shown / 1000 - a) <= near):
                return False
    return True


def pick_wrong(rng: random.Random, c: Company) -> tuple[str, int, float]:
    """An MD&A figure off by 3-9% of the true value (USD millions, one decimal)."""
    key = rng.choice(["revenue", "operating_income", "net_income"])
    year = rng.choice(c.years[2:])
    true = _m(c, key, year) / 1e6
    return key, year, round(true * (1 + rng.choice([-1, 1]) * rng.uniform(0.03, 0.09)), 1)
