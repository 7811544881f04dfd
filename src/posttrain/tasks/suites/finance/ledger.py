"""A double-entry company simulator: every journal entry balances, so the statements do.

Amounts are whole US dollars. Each fiscal year posts sales per segment, collections,
inventory purchases and cost of sales, supplier payments, operating expenses,
depreciation, capex, interest, borrowing or repayment, tax and dividends, then closes
income and expense accounts into retained earnings. `statements()` derives the income
statement and balance sheet from account balances and asserts assets = liabilities +
equity (true by construction: it checks the bookkeeping, not the data).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

INCOME = ("revenue", "cogs", "sga", "rd", "depreciation", "interest", "tax")
ASSETS = ("cash", "receivables", "inventory", "ppe", "accumulated_depreciation")


@dataclass
class Ledger:
    balances: dict[str, int] = field(default_factory=dict)    # debit-positive
    year_activity: dict[str, int] = field(default_factory=dict)
    entries: int = 0

    def post(self, memo: str, lines: dict[str, int]) -> None:
        """One journal entry: debits positive, credits negative, summing to zero."""
        if sum(lines.values()) != 0:
            raise AssertionError(f"unbalanced entry {memo}: {lines}")
        for account, amount in lines.items():
            self.balances[account] = self.balances.get(account, 0) + amount
            self.year_activity[account] = self.year_activity.get(account, 0) + amount
        self.entries += 1

    def bal(self, account: str) -> int:
        return self.balances.get(account, 0)

    def activity(self, prefix: str) -> int:
        return sum(v for k, v in self.year_activity.items() if k == prefix or k.startswith(prefix + ":"))


@dataclass
class Company:
    name: str
    segments: list[str]
    years: list[int]
    metrics: dict[int, dict[str, int]]       # fiscal year -> metric -> USD
    employees: dict[int, int]


def _year(ledger: Ledger, rng: random.Random, p: dict, y: int) -> dict[str, int]:
    ledger.year_activity = {}
    seg_rev = {}
    for s, base in p["segments"].items():
        amount = int(base * (1 + p["growth"][s]) ** y * rng.uniform(0.93, 1.07))
        seg_rev[s] = amount
        ledger.post(f"sales {s}", {"receivables": amount, f"revenue:{s}": -amount})
    revenue = sum(seg_rev.values())
    collected = ledger.bal("receivables") - int(revenue * p["dso"] / 365)
    ledger.post("collections", {"cash": collected, "receivables": -collected})
    cogs = int(revenue * p["cogs_ratio"] * rng.uniform(0.97, 1.03))
    bought = cogs + int(revenue * p["inventory_days"] / 365) - ledger.bal("inventory")
    ledger.post("purchases", {"inventory": bought, "payables": -bought})
    ledger.post("cost of sales", {"cogs": cogs, "inventory": -cogs})
    paid = -ledger.bal("payables") - int(bought * p["dpo"] / 365)
    ledger.post("pay suppliers", {"payables": paid, "cash": -paid})
    for acct in ("sga", "rd"):
        amount = int(revenue * p[acct] * rng.uniform(0.95, 1.05))
        ledger.post(acct, {acct: amount, "cash": -amount})
    dep = int(ledger.bal("ppe") * p["dep_rate"])
    ledger.post("depreciation", {"depreciation": dep, "accumulated_depreciation": -dep})
    capex = int(revenue * p["capex"] * rng.uniform(0.8, 1.2))
    ledger.post("capex", {"ppe": capex, "cash": -capex})
    interest = int(-ledger.bal("debt") * p["rate"])
    ledger.post("interest", {"interest": interest, "cash": -interest})
    repay = min(int(-ledger.bal("debt") * p["repay"]), -ledger.bal("debt"))
    ledger.post("repay debt", {"debt": repay, "cash": -repay})
    pretax = -ledger.activity("revenue") - sum(ledger.activity(a) for a in INCOME[1:6])
    tax = max(0, int(pretax * p["tax_rate"]))
    ledger.post("income tax", {"tax": tax, "cash": -tax})
    net = pretax - tax
    dividend = max(0, int(net * p["payout"]))
    ledger.post("dividends", {"retained_earnings": dividend, "cash": -dividend})
    if ledger.bal("cash") < revenue * 0.05:             # draw on the revolver
        draw = int(revenue * 0.08) - ledger.bal("cash")
        ledger.post("revolver draw", {"cash": draw, "debt": -draw})
    m = {f"revenue:{s}": v for s, v in seg_rev.items()}
    m |= {a: ledger.activity(a) for a in INCOME[1:]}
    m |= {"revenue": -ledger.activity("revenue"), "capex": capex, "dividends": dividend}
    closing = {k: -v for k, v in ledger.year_activity.items() if k.split(":")[0] in INCOME}
    closing["retained_earnings"] = -sum(closing.values())
    ledger.post("close the year", closing)
    return m


def statements(ledger: Ledger, m: dict[str, int], debt_current_share: float) -> dict[str, int]:
    """Income statement and balance sheet lines for one year, with their subtotals."""
    s = dict(m)
    s["gross_profit"] = s["revenue"] - s["cogs"]
    s["operating_expenses"] = s["sga"] + s["rd"] + s["depreciation"]
    s["operating_income"] = s["gross_profit"] - s["operating_expenses"]
    s["pretax_income"] = s["operating_income"] - s["interest"]
    s["net_income"] = s["pretax_income"] - s["tax"]
    for a in ("cash", "receivables", "inventory"):
        s[a] = ledger.bal(a)
    s["ppe_net"] = ledger.bal("ppe") + ledger.bal("accumulated_depreciation")
    s["current_assets"] = s["cash"] + s["receivables"] + s["inventory"]
    s["total_assets"] = s["current_assets"] + s["ppe_net"]
    s["payables"] = -ledger.bal("payables")
    debt = -ledger.bal("debt")
    s["debt_current"] = int(debt * debt_current_share)
    s["debt_long_term"] = debt - s["debt_current"]
    s["total_debt"] = debt
    s["current_liabilities"] = s["payables"] + s["debt_current"]
    s["total_liabilities"] = s["current_liabilities"] + s["debt_long_term"]
    s["common_stock"] = -ledger.bal("common_stock")
    s["retained_earnings"] = -ledger.bal("retained_earnings")
    s["total_equity"] = s["common_stock"] + s["retained_earnings"]
    if s["total_assets"] != s["total_liabilities"] + s["total_equity"]:
        raise AssertionError("balance sheet does not balance")
    return s


def _params(rng: random.Random, segments: list[str]) -> dict:
    scale = 10 ** rng.uniform(8, 9.5)
    weights = [rng.uniform(0.5, 2) for _ in segments]
    return {"segments": {s: int(scale * w / sum(weights)) for s, w in zip(segments, weights)},
            "growth": {s: rng.uniform(-0.08, 0.25) for s in segments},
            "dso": rng.uniform(30, 70), "inventory_days": rng.uniform(20, 90),
            "dpo": rng.uniform(25, 60), "cogs_ratio": rng.uniform(0.45, 0.7),
            "sga": rng.uniform(0.08, 0.18), "rd": rng.uniform(0.02, 0.1),
            "dep_rate": rng.uniform(0.08, 0.15), "capex": rng.uniform(0.03, 0.09),
            "rate": rng.uniform(0.03, 0.08), "repay": rng.uniform(0.05, 0.2),
            "tax_rate": rng.uniform(0.18, 0.28), "payout": rng.uniform(0.1, 0.5),
            "scale": scale}


def simulate(rng: random.Random, name: str, segments: list[str], first_year: int,
             n_years: int) -> Company:
    p = _params(rng, segments)
    ledger = Ledger()
    equity, debt, plant = int(p["scale"] * 0.6), int(p["scale"] * 0.4), int(p["scale"] * 0.7)
    ledger.post("founding equity", {"cash": equity, "common_stock": -equity})
    ledger.post("term loan", {"cash": debt, "debt": -debt})
    ledger.post("initial plant", {"ppe": plant, "cash": -plant})
    share = rng.uniform(0.08, 0.25)
    metrics, staff = {}, {}
    headcount = int(p["scale"] / rng.uniform(150_000, 400_000))
    for i in range(n_years):
        year = first_year + i
        metrics[year] = statements(ledger, _year(ledger, rng, p, i), share)
        headcount = int(headcount * rng.uniform(0.95, 1.12))
        staff[year] = headcount
    return Company(name, segments, list(metrics), metrics, staff)
