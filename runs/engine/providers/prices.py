"""Cost of a call from the price table in prices.json (data, edited by hand, each price dated).

An unknown model or unknown token counts give ``None``: an unknown cost, never
zero, so a total can say "at least" instead of pretending.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from runs.engine.types import Usage

PRICES_FILE = Path(__file__).with_name("prices.json")


@dataclass(frozen=True, slots=True)
class Price:
    input_per_million: float
    output_per_million: float
    as_of: str  # the date the provider published this price
    source: str | None = None


@lru_cache(maxsize=1)
def price_table() -> dict[str, Price]:
    data = json.loads(PRICES_FILE.read_text(encoding="utf-8"))
    return {
        model_id: Price(float(row["input"]), float(row["output"]), row["as_of"], row.get("source"))
        for model_id, row in data["models"].items()
    }


def price_of(model_id: str) -> Price | None:
    return price_table().get(model_id)


def cost_usd(model_id: str, usage: Usage) -> float | None:
    price = price_of(model_id)
    if price is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    return (usage.input_tokens * price.input_per_million + usage.output_tokens * price.output_per_million) / 1_000_000
