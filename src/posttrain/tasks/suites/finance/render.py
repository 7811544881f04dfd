"""Render a simulated company as a long 10-K-style Markdown report, recording every number.

Sections: business overview and risk factors (filler grown to a token target, with
distractor figures), MD&A (restates statement lines in millions or billions and growth
in percent), the statements (in thousands), and notes (segments, debt, employees).
Every printed number is recorded with the quantity it shows, so the question
generator can reject a question when an unrelated printed number lies near its answer.
Tokens are estimated as characters / 4.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from posttrain.tasks.suites.finance.ledger import Company

INCOME_LINES = [("revenue", "Revenue"), ("cogs", "Cost of revenue"), ("gross_profit", "Gross profit"),
                ("sga", "Selling, general and administrative"), ("rd", "Research and development"),
                ("depreciation", "Depreciation"), ("operating_income", "Operating income"),
                ("interest", "Interest expense"), ("pretax_income", "Income before income taxes"),
                ("tax", "Provision for income taxes"), ("net_income", "Net income")]
BALANCE_LINES = [("cash", "Cash and cash equivalents"), ("receivables", "Accounts receivable, net"),
                 ("inventory", "Inventories"), ("current_assets", "Total current assets"),
                 ("ppe_net", "Property, plant and equipment, net"), ("total_assets", "Total assets"),
                 ("payables", "Accounts payable"), ("debt_current", "Current portion of long-term debt"),
                 ("current_liabilities", "Total current liabilities"),
                 ("debt_long_term", "Long-term debt, less current portion"),
                 ("total_liabilities", "Total liabilities"), ("common_stock", "Common stock"),
                 ("retained_earnings", "Retained earnings"), ("total_equity", "Total stockholders' equity")]
LABELS = dict(INCOME_LINES + BALANCE_LINES)
FILLER_SUBJECTS = ("Our customers", "Competition in our markets", "Changes in trade policy",
                   "Our information systems", "Key suppliers", "Currency movements",
                   "Product quality", "Regulatory reviews", "Our distribution partners",
                   "Labor markets", "Climate-related events", "Cybersecurity incidents")
FILLER_VERBS = ("could adversely affect", "may reduce demand for", "might increase the cost of",
                "could delay", "may disrupt", "could limit")
FILLER_OBJECTS = ("our operating results", "our products", "our supply chain", "our margins",
                  "our expansion plans", "our ability to collect receivables")
FACTS = ("We operated {n} distribution facilities at year end.",
         "Our products were sold in {n} countries.", "We worked with approximately {n} suppliers.",
         "Our largest facility covers about {n} square meters.",
         "We filed {n} patent applications during the year.")


@dataclass
class Report:
    company: Company
    path: str
    text: str
    numbers: list[tuple[float, str | None]] = field(default_factory=list)  # (shown, quantity)
    mdna: dict[str, float] = field(default_factory=dict)      # key -> value shown in MD&A (USD m)


class _Writer:
    def __init__(self):
        self.parts: list[str] = []
        self.numbers: list[tuple[float, str | None]] = []
        self.chars = 0

    def num(self, shown: float, text: str, key: str | None) -> str:
        self.numbers.append((shown, key))
        return text

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.chars += len(text)

    def tokens(self) -> int:
        return self.chars // 4


def thousands(w: _Writer, v: int, key: str) -> str:
    k = round(v / 1000)
    text = f"({abs(k):,})" if k < 0 else f"{k:,}"
    return w.num(k, text, key)


def _table(w: _Writer, c: Company, lines, title: str, tag: str) -> None:
    head = "| (in thousands of U.S. dollars) | " + " | ".join(f"FY{y}" for y in c.years) + " |"
    rows = [f"### {title}\n", head, "|---|" + "---|" * len(c.years)]
    for key, label in lines:
        cells = [thousands(w, c.metrics[y][key], f"{tag}:{key}:{y}") for y in c.years]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    w.add("\n".join(rows) + "\n")


def _mdna(w: _Writer, c: Company, rng: random.Random, mdna: dict[str, float],
          wrong: tuple[str, int, float] | None) -> None:
    w.add("## Item 7. Management's Discussion and Analysis\n")
    for prev, year in zip(c.years, c.years[1:]):
        for key in ("revenue", "operating_income", "net_income"):
            now, before = c.metrics[year][key], c.metrics[prev][key]
            shown = round(now / 1e6, 1)
            if wrong and wrong[:2] == (key, year):
                shown = wrong[2]
            mdna[f"{key}:{year}"] = shown
            pct = round((now / before - 1) * 100, 1) if before else 0.0
            verb = "increased" if pct >= 0 else "decreased"
            w.add(f"{LABELS[key]} {verb} " + w.num(abs(pct), f"{abs(pct):.1f}%", f"growth:{key}:{year}")
                  + " to $" + w.num(shown, f"{shown:,.1f} million", f"mdna:{key}:{year}")
                  + f" in fiscal {year}, compared with fiscal {prev}. ")
        w.add("\n")
    last = c.metrics[c.years[-1]]
    b = round(last["total_assets"] / 1e9, 2)
    w.add("Total assets were $" + w.num(b, f"{b:.2f} billion", f"mdna_b:total_assets:{c.years[-1]}")
          + f" at the end of fiscal {c.years[-1]}.\n")


def _notes(w: _Writer, c: Company) -> None:
    w.add("## Notes to Consolidated Financial Statements\n")
    seg_lines = [(f"revenue:{s}", f"{s} segment revenue") for s in c.segments]
    _table(w, c, seg_lines, "Note 5. Segment Information", "note")
    debt = [("debt_current", "Due within one year"), ("debt_long_term", "Due after one year"),
            ("total_debt", "Total debt")]
    _table(w, c, debt, "Note 7. Debt", "note")
    staff = " ".join(f"At the end of fiscal {y} we had " + w.num(n, f"{n:,}", f"employees:{y}")
                     + " employees." for y, n in c.employees.items())
    w.add("### Note 9. Employees\n" + staff + "\n")


def _filler(w: _Writer, rng: random.Random, budget: int) -> None:
    while w.tokens() < budget:
        sents = [f"{rng.choice(FILLER_SUBJECTS)} {rng.choice(FILLER_VERBS)} {rng.choice(FILLER_OBJECTS)}."
                 for _ in range(rng.randint(3, 6))]
        if rng.random() < 0.3:
            n = rng.choice((rng.randint(3, 99), rng.randint(100, 9999)))
            sents.append(w.num(n, rng.choice(FACTS).format(n=f"{n:,}"), None))
        w.add(" ".join(sents) + "\n")


def render(c: Company, rng: random.Random, tokens: int,
           wrong: tuple[str, int, float] | None = None) -> Report:
    """The report of one company, grown with filler to about `tokens` tokens.
    `wrong` = (metric, year, value in USD millions) injects an MD&A figure that
    contradicts the statements."""
    w, mdna = _Writer(), {}
    last = c.years[-1]
    w.add(f"# {c.name} Annual Report on Form 10-K, fiscal year {last}\n")
    w.add("## Item 1. Business\n" + f"{c.name} reports in {len(c.segments)} segments: "
          + ", ".join(c.segments) + ".\n")
    body = _Writer()
    _mdna(body, c, rng, mdna, wrong)
    body.add("## Item 8. Financial Statements\n")
    _table(body, c, INCOME_LINES, "Consolidated Statements of Operations", "is")
    _table(body, c, BALANCE_LINES, "Consolidated Balance Sheets", "bs")
    _notes(body, c)
    w.add("## Item 1A. Risk Factors\n")
    _filler(w, rng, max(0, tokens - body.tokens()))
    w.parts += body.parts
    w.numbers += body.numbers
    slug = c.name.split()[0].lower()
    return Report(c, f"reports/{slug}_10-K_FY{last}.md", "\n".join(w.parts), w.numbers, mdna)
