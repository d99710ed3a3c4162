"""Metric checks: `$latency_under`, `$cost_under`, `$tokens_under`, `$llm_calls_under`, `$efficiency`.

They read what generation recorded for the response (``ResponseMetrics``), not its
text. What was not recorded (an unknown price, a cache hit's latency) is never a
pass or a fail: the point is not evaluated, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from blueprints.spec.functions import is_number

from .result import PointResult, not_evaluated, scored


@dataclass(frozen=True, slots=True)
class ResponseMetrics:
    latency_ms: float | None = None
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    llm_calls: int | None = None  # generated turns
    cached: bool = False

    @property
    def total_tokens(self) -> int | None:
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens


_NO_METRICS = "no run metrics were given (metric checks score what a run recorded, not text)"
_CACHED = "the response came from the response cache, so its {what} was not measured; run without the cache to measure it"


def latency_under(metrics: ResponseMetrics | None, args: object) -> PointResult:
    if not is_number(args) or args <= 0:
        return not_evaluated("Invalid arguments for 'latency_under'. Expected milliseconds greater than 0.")
    if metrics is None:
        return not_evaluated(_NO_METRICS)
    if metrics.cached:
        return not_evaluated(_CACHED.format(what="latency"))
    if metrics.latency_ms is None:
        return not_evaluated("the latency of this response was not recorded")
    return scored(metrics.latency_ms <= args, f"Generation took {metrics.latency_ms:,.0f} ms (limit {args:,} ms).")


def cost_under(metrics: ResponseMetrics | None, args: object) -> PointResult:
    if not is_number(args) or args < 0:
        return not_evaluated("Invalid arguments for 'cost_under'. Expected an amount in US dollars.")
    if metrics is None:
        return not_evaluated(_NO_METRICS)
    if metrics.cached:
        return not_evaluated(_CACHED.format(what="cost"))
    if metrics.cost_usd is None:
        return not_evaluated("the cost of this response is unknown (no price for the model)")
    return scored(metrics.cost_usd <= args, f"Generation cost ${metrics.cost_usd:.6f} (limit ${args:g}).")


def tokens_under(metrics: ResponseMetrics | None, args: object) -> PointResult:
    caps = {"total": args} if is_number(args) else args
    if not isinstance(caps, dict) or not caps:
        return not_evaluated("Invalid arguments for 'tokens_under'. Expected a count or {total, input, output}.")
    if metrics is None:
        return not_evaluated(_NO_METRICS)
    used = {"total": metrics.total_tokens, "input": metrics.input_tokens, "output": metrics.output_tokens}
    over, within = [], []
    for name, cap in caps.items():
        if name not in used or not is_number(cap):
            return not_evaluated(f"Invalid cap '{name}' for 'tokens_under'.")
        if used[name] is None:
            return not_evaluated(f"the {name} token count of this response was not recorded")
        (within if used[name] <= cap else over).append(f"{name} {used[name]:,} of {cap:,}")
    explain = "Tokens: " + ", ".join(within + over) + "."
    return scored(not over, explain)


def llm_calls_under(metrics: ResponseMetrics | None, args: object) -> PointResult:
    if not is_number(args) or args < 0:
        return not_evaluated("Invalid arguments for 'llm_calls_under'. Expected a whole number.")
    if metrics is None:
        return not_evaluated(_NO_METRICS)
    if metrics.llm_calls is None:
        return not_evaluated("the number of model calls was not recorded")
    return scored(metrics.llm_calls <= args, f"{metrics.llm_calls} model call(s) (limit {args:g}).")


def efficiency(metrics: ResponseMetrics | None, args: object) -> PointResult:
    """AI Eval's `efficiency` (reference 3.5): per budget, 1 within it, else budget / used; the score is the mean.
    Steps are the response's model calls (each step of a tool loop), tokens its input + output."""
    if not isinstance(args, dict) or not args or set(args) - {"max_steps", "max_tokens"} or not all(
            is_number(v) and v > 0 for v in args.values()):
        return not_evaluated("Invalid arguments for 'efficiency'. Expected {max_steps?, max_tokens?}.")
    if metrics is None:
        return not_evaluated(_NO_METRICS)
    used = {"max_steps": metrics.llm_calls, "max_tokens": metrics.total_tokens}
    words = {"max_steps": "model calls", "max_tokens": "tokens"}
    parts, scores = [], []
    for key in ("max_steps", "max_tokens"):
        if key not in args:
            continue
        if used[key] is None:
            return not_evaluated(f"the {words[key]} of this response were not recorded")
        budget, actual = args[key], used[key]
        scores.append(1.0 if actual <= budget else budget / actual)
        parts.append(f"{actual:,} {words[key]} of {budget:,g}")
    return scored(sum(scores) / len(scores), "Efficiency: " + ", ".join(parts) + ".")


METRIC_IMPLEMENTATIONS = {
    "latency_under": latency_under,
    "cost_under": cost_under,
    "tokens_under": tokens_under,
    "llm_calls_under": llm_calls_under,
    "efficiency": efficiency,
}
