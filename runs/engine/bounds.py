"""Deal-breaker bounds: how high a model's rate of failing a deal-breaker (a should-not point, or a point marked
``critical: true``) could be, from what was seen.

"0 failures in 90 answers" does not mean a failure rate of 0: it means the rate is at most 3.3% at 95%
confidence. The bound is the exact one-sided Clopper-Pearson upper limit: the largest failure rate ``p`` under
which seeing at most ``failures`` in ``n`` answers still has a chance of at least 5%, i.e. the ``confidence``
quantile of Beta(failures + 1, n - failures) (``scipy.special.betaincinv``); with no failure it is
``1 - (1 - confidence)^(1/n)``, close to the "rule of three" 3/n. Held to SciPy's
``binomtest(k, n, alternative="less").proportion_ci(method="exact")`` in tests/engine/test_bounds.py.

What counts (``should_not_bounds``): per model variant, every evaluated response (each trial counts) to a
prompt with a deal-breaker point (should-not or critical) is one answer; it is a failure when it met any
should-not point (the point's final score below 0.5: ``ResponseAssessment.violated_should_not``, stored with the
response) or failed any critical point (its final score below 0.5, a reviewer's override applied: the caller
names those responses, ``critical_failed``). Responses without a score (failed, not evaluated) are not answers:
a failure to score is neither a pass nor a fail.

A bound is "too wide" for a decision when it does not reach below the rate the decision needs (``DECISION_RATE``,
1%): the finding then says how many answers, none of them failing, would bring it there.

Pure Python and SciPy: no Django here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Container, Iterable, Sequence

CONFIDENCE = 0.95
DECISION_RATE = 0.01  # "under 1%": the failure rate a deal-breaker decision is held to


def upper_bound(failures: int, n: int, confidence: float = CONFIDENCE) -> float | None:
    """The exact one-sided Clopper-Pearson upper limit of a failure rate after ``failures`` in ``n``; None for
    no answer. 1 when every answer failed."""
    if n <= 0:
        return None
    if not 0 <= failures <= n:
        raise ValueError(f"failures must be between 0 and n ({n}), not {failures}")
    if failures == n:
        return 1.0
    from scipy.special import betaincinv  # the Beta quantile, without scipy.stats's 0.6 s import

    return float(betaincinv(failures + 1, n - failures, confidence))


def answers_needed(failures: int, rate: float, confidence: float = CONFIDENCE) -> int:
    """The fewest answers that, with ``failures`` failures among them, put the upper limit below ``rate``."""
    if failures == 0:  # 1 - (1 - c)^(1/n) < rate  <=>  n > log(1 - c) / log(1 - rate)
        n = math.floor(math.log(1 - confidence) / math.log(1 - rate)) + 1
        while upper_bound(0, n, confidence) >= rate:  # the float edge
            n += 1
        return n
    low, high = failures + 1, max(failures + 2, 16)
    while upper_bound(failures, high, confidence) >= rate:
        low, high = high, high * 2
    while low < high:
        mid = (low + high) // 2
        if upper_bound(failures, mid, confidence) < rate:
            high = mid
        else:
            low = mid + 1
    return low


def percent(x: float) -> str:
    """A rate as a page shows it: 3.3%, 0.12%, 100%."""
    value = 100 * x
    return f"{value:.0f}%" if value >= 10 else f"{value:.2g}%"


@dataclass(frozen=True, slots=True)
class Bound:
    """One model variant's deal-breaker figure."""

    variant_id: str
    failures: int
    n: int
    upper: float | None
    confidence: float = CONFIDENCE
    rate: float = DECISION_RATE  # what the decision needs the rate to be under

    @property
    def text(self) -> str:
        if self.upper is None:
            return "no scored answer to a deal-breaker (should-not or critical) point yet"
        failures = f"{self.failures} failure{'s' if self.failures != 1 else ''}"
        answers = f"{self.n} answer{'s' if self.n != 1 else ''}"
        return f"{failures} in {answers}: failure rate at most {percent(self.upper)} at {self.confidence:.0%}"

    @property
    def too_wide(self) -> bool:
        """The bound does not reach below the decision's rate."""
        return self.upper is None or self.upper >= self.rate

    @property
    def needed(self) -> int:
        """Answers in all, with no further failure, that would put the bound under the rate."""
        return answers_needed(self.failures, self.rate, self.confidence)

    @property
    def finding(self) -> str | None:
        """What the bound cannot say, in words; None when it is narrow enough."""
        if not self.too_wide:
            return None
        more = self.needed - self.n
        return (f"too few answers to say it is under {percent(self.rate)}: {self.needed} answers with no further "
                f"failure would ({more} more)")

    def to_dict(self) -> dict:
        return {"failures": self.failures, "answers": self.n, "upper": self.upper, "confidence": self.confidence,
                "rate": self.rate, "text": self.text, "finding": self.finding}


def should_not_prompts(prompts: Sequence) -> set[int]:
    """Positions of the prompts with a should-not point."""
    return {i for i, p in enumerate(prompts) if any(point.inverted for point in p.all_points())}


def is_critical(point) -> bool:
    return bool(getattr(point, "critical", False))


def critical_positions(prompts: Sequence) -> dict[int, list[int]]:
    """Per prompt position, the positions (in ``all_points`` order, as stored) of its critical points."""
    out = {}
    for i, p in enumerate(prompts):
        found = [j for j, point in enumerate(p.all_points()) if is_critical(point)]
        if found:
            out[i] = found
    return out


def deal_breaker_prompts(prompts: Sequence) -> set[int]:
    """Positions of the prompts with a should-not point or a critical point."""
    return {i for i, p in enumerate(prompts) if any(point.inverted or is_critical(point) for point in p.all_points())}


def should_not_bounds(records: Iterable, prompts: Sequence, variants: Iterable[str] | None = None, *,
                      critical_failed: Container[int] = frozenset(), confidence: float = CONFIDENCE,
                      rate: float = DECISION_RATE) -> dict[str, Bound]:
    """Per model variant, the bound over its answers to prompts with a deal-breaker point (``records``: the
    matrix's ``ResponseRecord``s, or any values with ``prompt_index``, ``variant_id``, ``score``,
    ``violated_should_not`` and ``response_id``; ``critical_failed``: the ids of the responses that failed a
    critical point). Variants with no such prompt are left out (an empty dict: no deal-breaker point)."""
    guarded = deal_breaker_prompts(prompts)
    if not guarded:
        return {}
    counts: dict[str, list[int]] = {v: [0, 0] for v in (variants or ())}
    for r in records:
        if r.prompt_index not in guarded:
            continue
        tally = counts.setdefault(r.variant_id, [0, 0])
        if r.score is None:
            continue
        tally[1] += 1
        failed = r.violated_should_not or getattr(r, "response_id", None) in critical_failed
        tally[0] += 1 if failed else 0
    return {v: Bound(v, f, n, upper_bound(f, n, confidence), confidence, rate) for v, (f, n) in counts.items()}


def matrix_bounds(matrix, **options) -> dict[str, Bound]:
    """``should_not_bounds`` over a results matrix's trials, in its column order."""
    records = [t for cell in matrix.cells.values() for t in cell.trials]
    found = should_not_bounds(records, matrix.prompts, matrix.variants, **options)
    return {v: found[v] for v in matrix.variants if v in found}
