"""Deterministic point functions: evaluate one `$function` point on one response.

Pure Python (never imports Django). Regexes are translated from JavaScript by
`blueprints.spec.jsregex`; `$js` runs in V8 through mini-racer with limits;
`$call` reaches only allowed hosts. See docs/points.md.
"""

from .assess import FunctionAssessment, InvalidPoint, assess_function_point, display_text
from .call import CallTransport, ResultCache
from .evaluate import evaluate_point
from .js_sandbox import JsSandbox, shared_sandbox
from .metrics import ResponseMetrics
from .result import PointResult
from .tool_trace import ToolTrace, parse_tool_calls, parse_tool_trace

__all__ = [
    "CallTransport",
    "FunctionAssessment",
    "InvalidPoint",
    "JsSandbox",
    "PointResult",
    "ResponseMetrics",
    "ResultCache",
    "ToolTrace",
    "assess_function_point",
    "display_text",
    "evaluate_point",
    "parse_tool_calls",
    "parse_tool_trace",
    "shared_sandbox",
]
