"""Readers for suites written in other formats: AgentV (``agentv.py``) and AI Eval (``aieval.py``).

Each takes loaded text plus the suite's companion files and returns the same
ParseResult as the Weval parser, with the dialect, an import report and the
fields kept aside. ``blueprints.spec.dialects.parse_any`` picks the reader.
"""
