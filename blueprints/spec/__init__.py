"""What a blueprint says, in plain Python: parsing, validation, ids. Never imports Django."""

from .dialects import detect_dialect, parse_any
from .diagnostics import Diagnostic
from .parse import ParseResult, parse_blueprint
from .schema import Blueprint, Message, Point, Prompt

__all__ = ["Blueprint", "Diagnostic", "Message", "ParseResult", "Point", "Prompt", "detect_dialect", "parse_any",
           "parse_blueprint"]
