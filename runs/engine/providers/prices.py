"""Cost of a call from the price table in prices.json (data, edited by hand, each price dated).

An unknown model or unknown token counts give ``None``: an unknown cost, never
zero, so a total can say "at least" instead of pretending.
"""

from __future__ import annotations

import json
import time
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


# What a call may answer when the caller sets no limit: the upstream's clients send 1500 (reference 5.8).
DEFAULT_MAX_TOKENS = 1500


_CHECK_EVERY_S = 1.0  # a run asks for every call: look at the file's time at most once a second
_checked: list = [float("-inf"), None, None]  # [when, path, stamp]


def price_table() -> dict[str, Price]:
    """The price table (reread when the file changes); a missing or unreadable file means every price is unknown."""
    now = time.monotonic()
    if now - _checked[0] >= _CHECK_EVERY_S or _checked[1] != PRICES_FILE:
        try:
            stamp = PRICES_FILE.stat().st_mtime_ns
        except OSError:
            stamp = None
        _checked[:] = [now, PRICES_FILE, stamp]
    stamp = _checked[2]
    return {} if stamp is None else _read(str(PRICES_FILE), stamp)


@lru_cache(maxsize=4)
def _read(path: str, _stamp: int) -> dict[str, Price]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        rows = data["models"] if isinstance(data, dict) and isinstance(data.get("models"), dict) else data
        return {model_id: Price(float(row["input"]), float(row["output"]), str(row.get("as_of", "")),
                                row.get("source"))
                for model_id, row in rows.items() if isinstance(row, dict)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def estimate_usd(model_id: str, input_tokens: int, output_tokens: int) -> float | None:
    """What so many tokens would cost with ``model_id``; None when its price is unknown (never 0)."""
    return cost_usd(model_id, Usage(input_tokens, output_tokens))


def price_of(model_id: str) -> Price | None:
    return price_table().get(model_id)


def cost_usd(model_id: str, usage: Usage) -> float | None:
    price = price_of(model_id)
    if price is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    return (usage.input_tokens * price.input_per_million + usage.output_tokens * price.output_per_million) / 1_000_000
