"""What evaluating one point function produces."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class PointResult:
    """The outcome of one point function on one response.

    `score` is 0..1, or None when the point was not evaluated; `error` then says
    why (in the upstream's words where a conformance record gives them).
    `explain` is the function's own explanation, None when it gives none.
    """

    score: float | None
    explain: str | None = None
    error: str | None = None

    @property
    def evaluated(self) -> bool:
        return self.score is not None


def not_evaluated(reason: str) -> PointResult:
    return PointResult(score=None, explain=None, error=reason)


def scored(value: bool | float, explain: str | None = None) -> PointResult:
    """A score from a boolean (1 or 0) or a number (clamped to 0..1)."""
    if isinstance(value, bool):
        return PointResult(score=1.0 if value else 0.0, explain=explain)
    number = float(value)
    if math.isnan(number):
        return not_evaluated("The function produced NaN instead of a score.")
    return PointResult(score=min(1.0, max(0.0, number)), explain=explain)


class InvalidPoint(ValueError):
    """A point object that cannot be scored at all (the upstream aborts the evaluation)."""


def js_json(value: object) -> str:
    """JSON.stringify's text for a JSON value: compact, and 1.0 written as 1."""

    def plain(item: object) -> object:
        if isinstance(item, float) and math.isfinite(item) and item.is_integer():
            return int(item)
        if isinstance(item, list):
            return [plain(element) for element in item]
        if isinstance(item, dict):
            return {key: plain(element) for key, element in item.items()}
        return item

    return json.dumps(plain(value), ensure_ascii=False, separators=(",", ":"), default=str)


def display_text(fn: str, args: object) -> str:
    """`Function: contains("x")`, as the upstream labels a function point; no argument shows `(undefined)`."""
    return f"Function: {fn}({'undefined' if args is None else js_json(args)})"
