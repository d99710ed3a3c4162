"""Which format a suite is written in, and one entry point that reads any of them.

Dialects, decided from the keys (reference 4.4):

* ``weval``: a Weval blueprint (everything that is not one of the below).
* ``agentv``: AgentV's ``EVAL.yaml``: ``tests`` (or the legacy ``evalcases`` /
  ``eval_cases``) whose items have ``input``/``input_messages``/``criteria``/
  ``expected_outcome``/``assert``/``assertions``/``rubrics``/``evaluators``, or a
  top-level ``execution``/``assert``/``assertions`` beside ``tests``.
* ``agentv-v5``: AgentV's later promptfoo-style format (``prompts`` as template
  strings, ``tests[].vars`` on a test without ``input``, ``default_test``, ``providers``,
  ``evaluate_options``, ``scenarios``, ``defaults`` as v5 writes it (a reference or
  ``{target, grader}``), v5-only assertion types such as ``llm-rubric``, ``script``,
  ``assert-set``, ``trajectory:*``; also a file of ``vars`` rows without input):
  recognised and refused with the reason. AgentV 4 has ``vars`` too (filled into the
  test's ``{{ }}`` placeholders) and ignores any other ``defaults``: read as ``agentv``.
* ``aieval``: an AI Eval suite: ``cases`` with ``suite`` or a ``prompt`` name (a suite
  without ``suite:`` is AI Eval's, refused by its importer as AI Eval refuses it).

A bare ``.jsonl`` file is read as AgentV reads one (``loadTests``): its lines are the tests of an
``agentv`` suite (a sidecar ``<name>.yaml`` may give ``description``/``dataset``/``execution``).

Two more kinds are companions, not suites: an AI Eval prompt file (``name`` and
``template``) and an AgentV file of test rows (a list of items with ``id`` and
``input``). Folder imports attach them to the suites that name them.
"""

from __future__ import annotations

import logging
from typing import Iterable, Mapping

from .diagnostics import Diagnostic
from .parse import CollectionLookup, ParseResult, detect_format, parse_blueprint, parse_loaded
from .limits import DEFAULT_LIMITS, Limits
from .source import Loaded, SourceError, load

logger = logging.getLogger(__name__)

WEVAL = "weval"
AGENTV = "agentv"
AGENTV_V5 = "agentv-v5"
AIEVAL = "aieval"
AIEVAL_PROMPT = "aieval-prompt"
AGENTV_TESTS = "agentv-tests"
SUITE_DIALECTS = (WEVAL, AGENTV, AIEVAL)
COMPANION_KINDS = (AIEVAL_PROMPT, AGENTV_TESTS)

LABELS = {
    WEVAL: "Weval blueprint",
    AGENTV: "AgentV suite (EVAL.yaml)",
    AGENTV_V5: "AgentV v5 suite (promptfoo-style)",
    AIEVAL: "AI Eval suite",
    AIEVAL_PROMPT: "AI Eval prompt file",
    AGENTV_TESTS: "AgentV test rows",
}

_AGENTV_TEST_KEYS = frozenset({"input", "input_messages", "criteria", "expected_outcome", "outcome", "assert",
                               "assertions", "rubrics", "evaluators", "expected_output", "expected_messages"})
_AGENTV_SUITE_KEYS = frozenset({"execution", "assert", "assertions", "workspace", "evalcases", "eval_cases"})
_WEVAL_PROMPT_KEYS = frozenset({"prompt", "promptText", "messages", "should", "should_not", "ideal", "idealResponse",
                                "points", "expect", "expects", "expectations"})
# Keys only AgentV's v5 (promptfoo-style) suites have at the top: Weval and AgentV 2-4 have none of them.
# (`defaults` is v5's too, but only in its own shape: see `_v5_defaults`.)
_V5_SUITE_KEYS = frozenset({"default_test", "providers", "evaluate_options", "scenarios"})
# v5's `defaults` is a reference (text) or a mapping of only these keys; AgentV 4 ignores any `defaults` (with a
# warning), and its examples use one to hold a YAML anchor (`defaults: {system_message: &x ...}`).
_V5_DEFAULTS_KEYS = frozenset({"target", "grader"})
# A test of AgentV 2-4 always has its input; v5 removed `tests[].input` (the prompt comes from `prompts`).
_V4_INPUT_KEYS = ("input", "input_messages")
# Assertion types that first appear in v5 (`trajectory:*` too); v2-v4 spell these `llm-grader`, `code-grader`...
_V5_ASSERT_TYPES = frozenset({"llm-rubric", "script", "assert-set", "skill-used", "javascript", "python",
                              "model-graded-closedqa", "select-best", "g-eval-v5"})


def _v5_assert_type(holders: Iterable) -> str | None:
    """The first v5-only assertion type in ``holders``' assertion lists (a bounded walk: two levels of nesting)."""
    def kinds(items, depth=0):
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                kind = item.get("type")
                if isinstance(kind, str):
                    yield kind
                if depth < 2:
                    yield from kinds(item.get("assert"), depth + 1)
    for holder in holders:
        if not isinstance(holder, dict):
            continue
        for key in ("assert", "assertions"):
            for kind in kinds(holder.get(key)):
                if kind in _V5_ASSERT_TYPES or kind.startswith("trajectory:"):
                    return kind
    return None


def _v5_defaults(value: object) -> bool:
    """Whether a top-level ``defaults`` has v5's shape (a reference, or ``{target, grader}``)."""
    if isinstance(value, str):
        return bool(value.strip())
    return isinstance(value, dict) and bool(value) and value.keys() <= _V5_DEFAULTS_KEYS


def _v5_vars_row(row: object) -> bool:
    """A test row with ``vars`` and no input of its own: v5's (AgentV 4 fills a test's ``vars`` into its input)."""
    return isinstance(row, dict) and "vars" in row and not any(row.get(k) is not None for k in _V4_INPUT_KEYS)


def v5_reason(doc: object) -> str | None:
    """What marks ``doc`` as AgentV v5 (reference 2.10), or None: ``prompts`` as template strings,
    ``tests[].vars`` without an input, ``providers``, v5's ``defaults``, a v5-only assertion type..."""
    if isinstance(doc, list):
        mappings = [i for i in doc if isinstance(i, dict)]
        if mappings and all(_v5_vars_row(i) and not (_WEVAL_PROMPT_KEYS & i.keys()) for i in mappings):
            return "test rows with `vars:`"
        return None
    if not isinstance(doc, dict):
        return None
    keys = set(doc)
    prompts = doc.get("prompts")
    text_prompts = isinstance(prompts, list) and any(isinstance(p, str) for p in prompts)
    if isinstance(prompts, list) and any(isinstance(p, dict) for p in prompts) and not text_prompts:
        return None  # a Weval blueprint, perhaps with a stray key; its parser names the stray key
    if keys & _V5_SUITE_KEYS:
        return f"`{sorted(keys & _V5_SUITE_KEYS)[0]}:`"
    if _v5_defaults(doc.get("defaults")):
        return "`defaults:`"
    if text_prompts:
        return "`prompts:` as template text"
    if "prompts" in keys and "tests" in keys:
        return "`prompts:` beside `tests:`"
    tests = doc.get("tests")
    rows = tests if isinstance(tests, list) else []
    if any(_v5_vars_row(t) for t in rows):
        return "tests with `vars:`"
    kind = _v5_assert_type([doc, *rows[:1000]])
    return f"the assertion type `{kind}`" if kind else None


def _looks_like_agentv_rows(items: object) -> bool:
    if not isinstance(items, list) or not items:
        return False
    mappings = [i for i in items if isinstance(i, dict)]
    strings = [i for i in items if isinstance(i, str)]
    if strings and all(s.startswith("file://") for s in strings) and not mappings:
        return True
    return bool(mappings) and all(
        (_AGENTV_TEST_KEYS & i.keys()) and not (_WEVAL_PROMPT_KEYS & i.keys()) for i in mappings)


def detect_dialect_of(documents: list) -> str:
    """The dialect of loaded documents (see the module's docstring)."""
    if len(documents) != 1:
        return WEVAL
    doc = documents[0]
    if isinstance(doc, list):
        if v5_reason(doc):
            return AGENTV_V5  # v5 test rows (`- id: ...` with `vars:`)
        return AGENTV_TESTS if _looks_like_agentv_rows(doc) else WEVAL
    if not isinstance(doc, dict):
        return WEVAL
    keys = set(doc)
    if "cases" in keys and "prompts" not in keys and ("suite" in keys or isinstance(doc.get("prompt"), str)):
        return AIEVAL  # without `suite:` too: AI Eval refuses it for that, and so does its importer here
    if "name" in keys and "template" in keys and not (_WEVAL_PROMPT_KEYS - {"prompt"}) & keys:
        return AIEVAL_PROMPT
    tests = doc.get("tests", doc.get("evalcases", doc.get("eval_cases")))
    if v5_reason(doc):
        return AGENTV_V5
    if "prompts" in keys:
        return WEVAL
    if "evalcases" in keys or "eval_cases" in keys:
        return AGENTV
    if "tests" in keys and (isinstance(tests, str) or _looks_like_agentv_rows(tests) or keys & _AGENTV_SUITE_KEYS):
        return AGENTV
    return WEVAL


def detect_dialect(text: str, *, path: str | None = None, fmt: str | None = None) -> str:
    """The dialect of a text; text that does not load is called ``weval`` (its parser reports the syntax error)."""
    fmt = fmt or detect_format(text, path)
    try:
        loaded = load(text, fmt)
    except SourceError:
        return WEVAL
    return detect_dialect_of(loaded.documents)


def parse_any(
    text: str,
    *,
    path: str | None = None,
    fmt: str | None = None,
    files: Mapping[str, str] | None = None,
    blueprint_id: str | None = None,
    collections: CollectionLookup | None = None,
    call_hosts: Iterable[str] = (),
    dialect: str | None = None,
    loaded: Loaded | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> ParseResult:
    """Read a Weval blueprint, an AgentV suite or an AI Eval suite into the same ParseResult.

    ``files`` are the suite's companion files, ``{path relative to the suite's folder: text}``
    (judge prompts, prompt files, external tests, scripts). The result's ``dialect``,
    ``import_report`` and ``extras`` say what the import did. ``limits`` bound the text, its nesting,
    its values with aliases expanded and its model variants. Never raises: an unexpected exception
    (a bug) is logged and reported as one ``internal`` error rather than taking a page down.
    """
    try:
        return _parse_any(text, path=path, fmt=fmt, files=files, blueprint_id=blueprint_id,
                          collections=collections, call_hosts=call_hosts, dialect=dialect, loaded=loaded,
                          limits=limits)
    except Exception:  # noqa: BLE001 - last resort; the causes found by fuzzing are fixed where they arise
        logger.exception("parsing %s raised", path or "a blueprint")
        diag = Diagnostic("error", "evalsite could not read this blueprint because of an internal error "
                                   "(it has been logged)", 1, 1, "", "please report it with the blueprint attached; "
                                   "meanwhile, simplify the part you changed last", "internal")
        return ParseResult(None, [diag], [], fmt or detect_format(text or "", path), dialect=dialect or WEVAL)


def _parse_any(text, *, path, fmt, files, blueprint_id, collections, call_hosts, dialect, loaded, limits):
    fmt = fmt or detect_format(text, path)
    if path and str(path).lower().endswith(".jsonl"):
        loaded = None  # read line by line below, whatever a first look at the text made of it
    elif loaded is None:
        try:
            loaded = load(text, fmt, limits)
        except SourceError:
            return parse_blueprint(text, path=path, fmt=fmt, blueprint_id=blueprint_id, collections=collections,
                                   call_hosts=call_hosts, limits=limits)
    if path and str(path).lower().endswith(".jsonl") and dialect in (None, AGENTV):
        loaded = _jsonl_suite(text, path, files, limits)
        if isinstance(loaded, Diagnostic):
            return ParseResult(None, [loaded], [], "json", dialect=AGENTV)
        dialect = AGENTV_V5 if v5_reason(loaded.documents[0]["tests"]) else AGENTV
    dialect = dialect or detect_dialect_of(loaded.documents)
    derived = blueprint_id
    if derived is None and path:
        from .ids import blueprint_id_for_file

        derived = blueprint_id_for_file(path)
    if dialect == AGENTV:
        from .importers.agentv import import_agentv

        return import_agentv(loaded, files=files, blueprint_id=derived, collections=collections,
                             call_hosts=call_hosts, limits=limits)
    if dialect == AIEVAL:
        from .importers.aieval import import_aieval

        return import_aieval(loaded, files=files, blueprint_id=derived, collections=collections,
                             call_hosts=call_hosts, limits=limits)
    if dialect in (AGENTV_V5, *COMPANION_KINDS):
        return ParseResult(None, [_not_a_suite(dialect, loaded)], [], fmt, dialect=dialect)
    return parse_loaded(loaded, path=path, blueprint_id=blueprint_id, collections=collections, call_hosts=call_hosts,
                        limits=limits)


_SIDECAR_KEYS = ("name", "description", "dataset", "execution")


def _jsonl_suite(text: str, path: str, files: Mapping[str, str] | None, limits: Limits) -> Loaded | Diagnostic:
    """A bare ``.jsonl`` file as AgentV reads one (its ``loadTestsFromJsonl``): each line is a test; a sidecar
    ``<name>.yaml`` beside it may give the suite's ``description``, ``dataset`` and ``execution``. The tests keep
    their lines and columns; the suite around them is the file's start."""
    from .importers.common import jsonl_as_array

    try:
        rows = load(jsonl_as_array(text), "json", limits)
    except SourceError as exc:
        return Diagnostic("error", "a line of this JSON Lines file is not JSON: " + exc.message.split(": ", 1)[-1],
                          exc.line, exc.column, "", exc.hint or "write one test object per line", "syntax")
    tests = rows.documents[0] if rows.documents else []
    suite: dict = {}
    stem = str(path).replace("\\", "/").rsplit("/", 1)[-1][: -len(".jsonl")]
    sidecar_text = (files or {}).get(f"{stem}.yaml")
    if isinstance(sidecar_text, str):
        try:
            sidecar = load(sidecar_text, "yaml", limits).documents
        except SourceError:
            sidecar = []
        if len(sidecar) == 1 and isinstance(sidecar[0], dict):
            suite.update({k: sidecar[0][k] for k in _SIDECAR_KEYS if k in sidecar[0]})
    suite["tests"] = tests
    rows.locator._alive.append(suite)
    return Loaded(documents=[suite], document_starts=rows.document_starts or [(1, 1)], locator=rows.locator,
                  fmt="json")


def _not_a_suite(dialect: str, loaded) -> Diagnostic:
    line, column = loaded.document_starts[0] if loaded.document_starts else (1, 1)
    if dialect == AGENTV_V5:
        reason = v5_reason(loaded.documents[0]) if loaded.documents else None
        return Diagnostic("error", "this is AgentV's v5 format (promptfoo-style `prompts`, `vars`, `default_test`"
                                   + (f"; this file has {reason}" if reason else "") + "), which evalsite does not "
                                   "read yet", line, column, "", "write the suite in AgentV's "
                                   "eval spec v2 form (`tests` with `input`, `criteria`, `assert`) or as a blueprint",
                          "dialect")
    if dialect == AIEVAL_PROMPT:
        return Diagnostic("error", "this is an AI Eval prompt file (`name` and `template`), not a suite", line, column,
                          "", "import or validate the suite in tests/ that names it with `prompt:`; the prompt file "
                              "comes along", "dialect")
    return Diagnostic("error", "this is a file of AgentV test rows, not a suite", line, column, "",
                      "import or validate the EVAL.yaml whose `tests:` names this file; it comes along", "dialect")


def _starts_with_a_list(text: str) -> bool:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and stripped != "---":
            return stripped.startswith(("-", "["))
    return False


def companion_kind(text: str, path: str | None = None) -> str | None:
    """``aieval-prompt`` or ``agentv-tests`` when the text is a companion file rather than a suite."""
    if path and str(path).lower().endswith((".jsonl", ".csv", ".md", ".txt")):
        return "data"
    if "template" not in text and not _starts_with_a_list(text):
        return None  # neither a prompt file (name + template) nor a list of test rows: no need to load it
    kind = detect_dialect(text, path=path)
    return kind if kind in COMPANION_KINDS else None
