"""Deterministic point functions: evaluate one `$function` point on one response.

Pure Python (never imports Django). Regexes are translated from JavaScript by
`blueprints.spec.jsregex`; `$js` runs in V8 through mini-racer with limits;
`$call` reaches only allowed hosts. See docs/points.md.
"""

from .call import CallTransport, ResultCache
from .evaluate import evaluate_point
from .js_sandbox import JsSandbox, shared_sandbox
from .metrics import ResponseMetrics
from .result import InvalidPoint, PointResult, display_text
from .tool_trace import ToolTrace, parse_tool_calls, parse_tool_trace, render_tool_calls, text_with_tool_calls

__all__ = [
    "CallTransport",
    "InvalidPoint",
    "JsSandbox",
    "PointResult",
    "ResponseMetrics",
    "ResultCache",
    "ToolTrace",
    "display_text",
    "evaluate_point",
    "parse_tool_calls",
    "parse_tool_trace",
    "render_tool_calls",
    "shared_sandbox",
    "text_with_tool_calls",
]
