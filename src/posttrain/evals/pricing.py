"""Cost of a trial from a per-model price table (USD per million input / output tokens).

No prices are built in: hosted prices change and a stale table is worse than none. Pass a
TOML or JSON file mapping model name to prices, e.g.

    ["my-model"]
    input_per_mtok = 0.15
    output_per_mtok = 0.60

A local checkpoint with no entry costs nothing to the API (cost stays null, not 0, for
an endpoint whose model has no entry, so a missing price is not mistaken for a free one).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from posttrain.errors import ConfigError


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float

    def cost(self, n_in: int, n_out: int) -> float:
        return (n_in * self.input_per_mtok + n_out * self.output_per_mtok) / 1e6


def load_prices(path: str | Path | None) -> dict[str, Price]:
    """Read a price table; an empty table if path is None."""
    if path is None:
        return {}
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: price table not found")
    try:
        raw = tomllib.loads(p.read_text()) if p.suffix == ".toml" else json.loads(p.read_text())
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{p}: cannot parse price table: {e}") from None
    prices = {}
    for model, entry in raw.items():
        try:
            prices[model] = Price(float(entry["input_per_mtok"]), float(entry["output_per_mtok"]))
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"{p}: entry {model!r} needs numeric input_per_mtok and "
                              "output_per_mtok") from None
    return prices


def trial_cost(prices: dict[str, Price], model: str, n_in: int, n_out: int) -> float | None:
    price = prices.get(model)
    return None if price is None else price.cost(n_in, n_out)
