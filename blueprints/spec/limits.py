"""Limits on everything a blueprint, a suite or a model's response can make us do.

One frozen value, built once from settings (`evalsite.settings.EVALSITE_LIMITS`)
and passed down; the defaults here are the ones a caller without settings gets
(the command line in tests, the conformance suite). Nothing in `blueprints/spec`
or `runs/engine` reads the environment: they take a `Limits`.

Each limit is checked before the work it bounds, and going past it is a located
error (parsing) or a "not evaluated" reason (scoring), never a crash or a hang.
docs/points.md and the README's security section list them with their settings.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limits", "DEFAULT_LIMITS"]


@dataclass(frozen=True)
class Limits:
    # Scoring ------------------------------------------------------------------
    # Seconds one regex match may take (`$match` and friends, tool-argument
    # patterns, imported suites' regex checks): EVALSITE_REGEX_TIMEOUT_S.
    regex_timeout_s: float = 1.0
    # `$js`: milliseconds and bytes per evaluation (EVALSITE_JS_TIMEOUT_MS,
    # EVALSITE_JS_MEMORY_MB); typed arrays count against the memory too.
    js_timeout_ms: int = 100
    js_memory_bytes: int = 64 * 1024 * 1024
    # Seconds of wall-clock time one item (prompt x model variant x trial:
    # generation, then every point) may take in a worker before it is failed
    # with the reason: EVALSITE_ITEM_BUDGET_S.
    item_budget_s: float = 900.0

    # Parsing ------------------------------------------------------------------
    # Characters of blueprint text (EVALSITE_MAX_BLUEPRINT_CHARS).
    max_text_chars: int = 5_000_000
    # YAML/JSON nodes after aliases are expanded (EVALSITE_MAX_NODES): an alias
    # counts the whole subtree it stands for, so a "billion laughs" is refused
    # before it is built. The largest real blueprint we know has about 2,000; 100,000 load in
    # about 0.6 s, so any text within the limits parses well under the 2 s budget.
    max_nodes: int = 100_000
    # Characters of text after aliases are expanded (EVALSITE_MAX_EXPANDED_CHARS): an alias
    # counts every character of the anchor it repeats, each time it is used, so one long
    # anchored scalar used a hundred times is refused before it is built (and before the pages,
    # the preview and runs repeat it). The default equals the text limit: aliases save typing,
    # they do not buy more than the same blueprint written out longhand could hold, so whatever
    # was sized for the text limit stays sized. Text without aliases never expands (a value is
    # never longer than the text that writes it), so a blueprint within the text limit passes.
    max_expanded_chars: int = 5_000_000
    # Nesting depth of mappings and lists (EVALSITE_MAX_DEPTH).
    max_depth: int = 200
    # Model variants the preview lists and a run may expand to: models x
    # temperatures x system prompts (EVALSITE_MAX_VARIANTS).
    max_variants: int = 2_000


DEFAULT_LIMITS = Limits()
