"""One authored function point, scored and labelled as an assessment (inversion, display text).

The judged half of an evaluation lives elsewhere; this is the part of the
upstream evaluator that needs nothing but the point function.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from .evaluate import evaluate_point


class InvalidPoint(ValueError):
    """A point object that cannot be scored at all (the upstream aborts the evaluation)."""


@dataclass(frozen=True)
class FunctionAssessment:
    key_point_text: str
    coverage_extent: float | None  # after inversion; None when not evaluated
    is_inverted: bool
    multiplier: float
    citation: str | None
    explain: str | None
    error: str | None


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


def _function_of(point: Mapping) -> tuple[str, object]:
    if isinstance(point.get("fn"), str):
        return point["fn"], point.get("fnArgs", point.get("arg"))
    for key, value in point.items():
        if isinstance(key, str) and key.startswith("$"):
            return key[1:], value
    raise InvalidPoint("Point object has no function ('fn' or idiomatic '$name').")


def assess_function_point(
    point: Mapping,
    response: str,
    *,
    inverted: bool = False,
    prompt_id: str | None = None,
    **context: object,
) -> FunctionAssessment:
    """Score a normalised function point (`{fn, fnArgs | arg, multiplier?, citation?}`).

    `inverted` is True for a point from `should_not`: its score becomes 1 - score.
    Further keyword arguments go to evaluate_point (messages, model_id, ...).
    """
    if point.get("text") and (point.get("fn") or any(str(key).startswith("$") for key in point)):
        raise InvalidPoint(
            "Point object cannot have both 'text' and a function ('fn' or idiomatic). "
            f"Prompt ID: '{prompt_id}'"
        )
    fn, args = _function_of(point)
    result = evaluate_point(fn, args, response, prompt_id=prompt_id, **context)
    coverage = result.score
    if coverage is not None and inverted:
        coverage = 1.0 - coverage
    multiplier = point.get("multiplier", point.get("weight", 1))
    citation = point.get("citation")
    return FunctionAssessment(
        key_point_text=display_text(fn, args),
        coverage_extent=coverage,
        is_inverted=inverted,
        multiplier=float(multiplier) if isinstance(multiplier, (int, float)) else 1.0,
        citation=citation if isinstance(citation, str) else None,
        explain=result.explain,
        error=result.error,
    )
