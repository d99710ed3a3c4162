# Over 500 lines: one builder per AgentV assertion type (the BUILDERS table at the end), each taking one Assertion.
"""AgentV suites (``EVAL.yaml``) -> a normalised Blueprint, with an import report per test.

Reads the eval spec v2 form of the seeds (``tests`` / ``criteria`` / ``rubrics`` /
``assert``), the legacy form (``evalcases``, ``expected_outcome``, ``input_messages``,
``expected_messages``, ``execution.evaluators``) and the v3/v4 renames
(``assertions``, ``llm-grader``, ``code-grader``, ``eval_set``, ``threshold``).
docs/importing.md has the mapping table; reference sections 2 and 4.1 the behaviour.

Decisions where AgentV's docs and code differ (reference 2.10), made explicit:

* a plain-string rubric is not required (the docs' default; the code's is true);
* a required rubric item fails the verdict when missed (a per-point minimum at the
  pass mark) but does not zero the score; an evaluator's ``required`` is a gate that
  does (seed 002);
* rubric items are judged on evalsite's scale, each as its own point; an evaluator's
  rubric weights are normalised inside its weight, so the test score is AgentV's
  weighted average of evaluator scores.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..bands import read_score_ranges, uncovered
from ..diagnostics import format_path
from ..ids import normalize_tags
from ..limits import DEFAULT_LIMITS, Limits
from ..model_ids import is_collection_name
from ..notes import External, choice_hint, did_you_mean
from ..parse import ParseResult
from ..schema import Blueprint, Message, Origin, Point, Prompt, Verdicts
from ..source import Loaded
from .common import (
    ImportReader,
    ImportReport,
    TestReport,
    csv_rows,
    function_point,
    is_number,
    judged_point,
    new_check,
    normalize_relative,
    short,
)

SUITE_KEYS = frozenset({
    "name", "description", "version", "author", "license", "tags", "requires", "input", "input_messages", "tests",
    "eval_cases", "evalcases", "target", "execution", "assert", "assertions", "evaluators", "workspace", "dataset",
    "eval_set", "metadata", "threshold", "$schema",
})
TEST_KEYS = frozenset({
    "id", "criteria", "expected_outcome", "outcome", "input", "input_messages", "expected_output",
    "expected_messages", "rubrics", "assert", "assertions", "evaluators", "execution", "workspace", "metadata",
    "conversation_id", "note", "description", "skip_defaults", "threshold", "input_files", "vars",
})
COMMON_ITEM_KEYS = frozenset({"name", "type", "weight", "required", "negate", "min_score"})
TRAJECTORY_MODES_SEED = ("any_order", "in_order", "exact")
TRAJECTORY_MODES_ALL = ("any_order", "in_order", "exact", "superset", "subset")
TYPE_ALIASES = {
    "llm_grader": "llm_judge", "code_grader": "code_judge", "g_eval": "llm_judge", "rubric": "rubric",
    "contains_any": "contains_any", "regex_match": "regex", "json": "is_json", "equal": "equals",
    "trajectory": "tool_trajectory",
}
KNOWN_TYPES = (
    "contains", "icontains", "starts_with", "ends_with", "equals", "contains_any", "contains_all", "icontains_any",
    "icontains_all", "regex", "is_json", "rubrics", "rubric", "llm_judge", "code_judge", "composite",
    "tool_trajectory", "field_accuracy", "latency", "cost", "token_usage", "execution_metrics", "agent_judge",
)
PASS_MARK = 0.8
TEMPLATE_VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
ENV_INTERPOLATION = re.compile(r"\$\{\{\s*[A-Za-z_][A-Za-z0-9_]*\s*\}\}")
NOT_AN_AGENT = "evalsite runs language models, not agent targets, and has no workspace for an agent to work in"


def import_agentv(loaded: Loaded, *, files: Mapping[str, str] | None, blueprint_id: str | None, collections,
                  call_hosts, limits: Limits = DEFAULT_LIMITS) -> ParseResult:
    reader = _AgentV(loaded, derived_id=blueprint_id, collections=collections, call_hosts=call_hosts, files=files,
                     limits=limits)
    blueprint, report = reader.read_suite()
    return reader.result(blueprint, report, loaded.fmt)


def _content_blocks(value: Any) -> bool:
    """Whether ``value`` is a list of content blocks (``{type: text|file|image|json, value}``), not messages."""
    items = value if isinstance(value, list) else [value] if isinstance(value, dict) else []
    return bool(items) and any(isinstance(i, dict) for i in items) and all(
        isinstance(i, str) or (isinstance(i, dict) and "role" not in i and i.get("type") in
                               ("text", "file", "image", "json")) for i in items)


@dataclass(frozen=True)
class Assertion:
    """One assertion being built: what every builder in BUILDERS takes."""

    item: dict  # the assertion as written
    path: tuple  # where it is, for messages
    origin: Origin
    weight: float  # the share of the test's score its points split between them
    check_id: str | None  # the check its points belong to
    negate: bool
    prompt: Prompt
    rep: TestReport
    label: str


def _kind(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    key = value.strip().lower().replace("-", "_")
    return TYPE_ALIASES.get(key, key)


class _AgentV(ImportReader):
    dialect = "agentv"

    def read_suite(self) -> tuple[Blueprint, ImportReport]:
        report = ImportReport("agentv", "AgentV suite")
        bp = Blueprint(derived_id=self.derived_id)
        docs = self.loaded.documents
        if len(docs) != 1 or not isinstance(docs[0], dict):
            self.error("an AgentV suite is one YAML mapping with `tests`", None, None, (), code="structure")
            return bp, report
        suite = docs[0]
        self.suite = suite
        self.suite_report = report.suite
        self.read_metadata(suite, bp, report.suite)
        self.unknown_suite_keys(suite)
        self.legacy = any(k in suite for k in ("evalcases", "eval_cases"))
        defaults = self.read_execution(suite, bp, report.suite)
        default_asserts = self.suite_asserts(suite)
        suite_input = self.read_suite_input(suite)
        if "workspace" in suite:
            self.extras["workspace"] = suite["workspace"]
            report.suite.unsupported_("workspace", NOT_AN_AGENT)
        if "threshold" in suite:
            defaults["verdicts"] = self.read_threshold(suite, ())
        rows = self.read_tests_field(suite)
        seen: dict[str, int] = {}
        for entry in rows:
            row, holder, key, path = entry[:4]
            self.external = entry[4] if len(entry) > 4 else None
            test_report = TestReport(str(row.get("id")) if isinstance(row, dict) else format_path(path))
            try:
                prompt = self.read_test(row, holder, key, path, test_report, defaults, default_asserts, suite_input)
            finally:
                self.external = None
            report.tests.append(test_report)
            if prompt is None:
                continue
            if prompt.id in seen:
                self.error(f"duplicate test id '{prompt.id}' (also used by the test at line {seen[prompt.id]})",
                           row, "id", (*path, "id"), "give each test a unique `id`", "duplicate-id")
            else:
                seen[prompt.id] = prompt.origin.line or 0
            bp.prompts.append(prompt)
        if not rows and not any(d.is_error for d in self.diagnostics):
            self.error("the suite has no tests", suite, "tests" if "tests" in suite else None, ("tests",),
                       "add `tests:` with at least one `- id: ...` and `input: ...`", "tests")
        if "workspace" in suite:
            for test in report.tests:
                test.unsupported_("workspace", NOT_AN_AGENT)
        if ENV_INTERPOLATION.search(json.dumps(suite, default=str)):
            self.warn("`${{ VAR }}` interpolation is not applied: evalsite never reads the environment into a suite",
                      None, None, (), "write the values in the suite", "interpolation")
            report.suite.unsupported_("${{ VAR }} interpolation", "a suite may not read the operator's environment")
        return bp, report

    # --- suite ------------------------------------------------------------------------------------

    def read_metadata(self, suite, bp: Blueprint, rep: TestReport):
        if "name" in suite:
            name = suite["name"]
            if isinstance(name, str) and name.strip():
                bp.title = name
                rep.map("name -> title")
                if not re.fullmatch(r"[a-z0-9-]{1,64}", name):
                    self.warn("an AgentV `name` is 1 to 64 lower-case letters, digits and hyphens", suite, "name",
                              ("name",), "e.g. `name: export-screening`", "name")
            else:
                self.error("`name` must be text", suite, "name", ("name",), code="type")
        if "description" in suite:
            bp.description = self.expect_text(suite, "description", ("description",))
            rep.map("description")
        if "author" in suite:
            if isinstance(suite["author"], str):
                bp.author = suite["author"]
                rep.map("author")
            else:
                self.error("`author` must be text", suite, "author", ("author",), code="type")
        if "tags" in suite:
            tags = suite["tags"]
            if isinstance(tags, list) and all(isinstance(t, str) for t in tags):
                bp.tags = normalize_tags(tags)
                rep.map("tags")
            else:
                self.error("`tags` must be a list of text", suite, "tags", ("tags",), "e.g. `tags: [safety]`", "type")
        metadata_keys = [k for k in ("version", "author", "tags", "license", "requires") if k in suite]
        if metadata_keys and not (suite.get("name") and suite.get("description")):
            missing = [k for k in ("name", "description") if not suite.get(k)]
            self.warn(f"with metadata ({', '.join(metadata_keys)}), AgentV's spec asks for `name` and `description` "
                      f"too; missing: {', '.join(missing)}", suite, metadata_keys[0], (metadata_keys[0],),
                      "add them so the suite can be found and shared", "metadata", at_key=True)
        for key in ("version", "license", "requires", "dataset", "eval_set", "metadata", "$schema"):
            if key in suite:
                self.extras[key] = suite[key]
                rep.map(f"{key} (kept aside)")

    def unknown_suite_keys(self, suite):
        for key in suite:
            if key not in SUITE_KEYS:
                self.warn(f"unknown key `{key}` in an AgentV suite; it is kept aside, not used", suite, key, (key,),
                          self._hint(key, SUITE_KEYS), "unknown-key", at_key=True)
                self.extras.setdefault("unknown", {})[key] = suite[key]

    def _hint(self, key, known):

        close = did_you_mean(key, known)
        return f"did you mean `{close}`?" if close else None

    def read_threshold(self, holder, path) -> Verdicts | None:
        value = holder["threshold"]
        if is_number(value) and 0 <= value <= 1:
            return Verdicts(pass_at=float(value), borderline_at=None)
        self.error(f"`threshold` must be a number from 0 to 1, not {value!r}", holder, "threshold",
                   (*path, "threshold"), code="threshold")
        return None

    def read_execution(self, suite, bp: Blueprint, rep: TestReport) -> dict:
        defaults: dict[str, Any] = {"verdicts": Verdicts(), "trials": None, "trial_aggregation": None,
                                    "no_cache": None}
        targets = []
        if "target" in suite:
            targets.append((suite, "target", ("target",), suite["target"]))
        execution = suite.get("execution")
        if execution is None:
            self.apply_targets(targets, bp, rep)
            return defaults
        if not isinstance(execution, dict):
            self.error("`execution` must be a mapping", suite, "execution", ("execution",), code="type")
            return defaults
        path = ("execution",)
        known = ("target", "targets", "trials", "cache", "total_budget_usd", "fail_on_error", "evaluators",
                 "assert", "assertions", "skip_defaults", "timeout_seconds")
        for key in execution:
            if key not in known:
                self.warn(f"unknown key `{key}` in `execution`; it is kept aside", execution, key, (*path, key),
                          self._hint(key, known), "unknown-key", at_key=True)
        for key in ("target", "targets"):
            if key in execution:
                targets.append((execution, key, (*path, key), execution[key]))
        self.apply_targets(targets, bp, rep)
        if "trials" in execution:
            trials = self.read_trials(execution, path, rep)
            defaults.update(trials)
        if "cache" in execution:
            if isinstance(execution["cache"], bool):
                bp.no_cache = not execution["cache"]
                defaults["no_cache"] = bp.no_cache
                rep.approx("execution.cache", "the response cache is on unless a suite says `cache: false` "
                                              "(AgentV's is off unless asked)")
            else:
                self.error("`execution.cache` must be true or false", execution, "cache", (*path, "cache"),
                           code="type")
        for key in ("total_budget_usd", "fail_on_error", "timeout_seconds"):
            if key in execution:
                self.extras.setdefault("execution", {})[key] = execution[key]
                rep.unsupported_(f"execution.{key}", "run policy evalsite does not have; kept aside")
        return defaults

    def apply_targets(self, targets, bp: Blueprint, rep: TestReport):
        models, names = [], []
        for holder, key, path, value in targets:
            values = value if isinstance(value, list) else [value]
            for index, item in enumerate(values):
                if isinstance(item, dict):  # AgentV 4: `{name, use_target, hooks, ...}`
                    item = self.target_object(item, values, index, (*path, index), rep)
                    if item is None:
                        continue
                if not isinstance(item, str) or not item.strip():
                    self.error(f"`{key}` must name targets (text, or `{{name, use_target}}`)", holder, key, path,
                               code="type")
                    continue
                (models if ":" in item or is_collection_name(item) else names).append(item)
        if models:
            bp.models = list(dict.fromkeys(models))
            bp.models_given = True
            rep.map("execution.targets -> models")
        if names:
            self.extras["targets"] = names
            rep.approx("execution.targets", f"target names ({', '.join(names)}) come from .agentv/targets.yaml, "
                                            "which evalsite does not read: choose the models when you start a run")

    def target_object(self, item: dict, holder, index, path, rep: TestReport) -> str | None:
        """An AgentV 4 target object: the target it runs is ``use_target`` (else its ``name``); ``hooks`` and the
        rest are run policy evalsite does not have, kept aside."""
        name = item.get("use_target", item.get("name"))
        if not isinstance(name, str) or not name.strip():
            self.error("a target object needs `name` or `use_target` (the target it runs)", holder, index, path,
                       "e.g. `- {name: with-hooks, use_target: claude}`", "type")
            return None
        rest = {k: v for k, v in item.items() if k not in ("name", "use_target")}
        if rest:
            self.extras.setdefault("target_options", {})[str(item.get("name", name))] = rest
            rep.unsupported_("target " + ", ".join(f"`{k}`" for k in sorted(rest)),
                             "per-target settings (hooks, budgets) evalsite does not have; kept aside")
        return name.strip()

    def read_trials(self, holder, path, rep: TestReport) -> dict:
        value = holder["trials"]
        out: dict[str, Any] = {}
        count, strategy = None, None
        if isinstance(value, int) and not isinstance(value, bool):
            count = value
        elif isinstance(value, dict):
            count = value.get("count")
            strategy = value.get("strategy", "pass_at_k")
            if "cost_limit_usd" in value:
                rep.unsupported_("trials.cost_limit_usd", "trials are not stopped by spending; kept aside")
                self.extras.setdefault("trials", {})["cost_limit_usd"] = value["cost_limit_usd"]
        else:
            self.error("`trials` must be a number or `{count, strategy}`", holder, "trials", (*path, "trials"),
                       code="trials")
            return out
        if not (isinstance(count, int) and not isinstance(count, bool) and 1 <= count <= 100):
            self.error(f"`trials.count` must be a whole number from 1 to 100, not {count!r}", holder, "trials",
                       (*path, "trials"), code="trials")
            return out
        out["trials"] = count
        mapping = {"pass_at_k": "best", "mean": "mean", "confidence_interval": "mean"}
        if not isinstance(strategy, str) or strategy not in mapping:
            self.error(f"`trials.strategy` must be pass_at_k, mean or confidence_interval, not {strategy!r}",
                       value, "strategy", (*path, "trials", "strategy"), code="trials")
            return out
        out["trial_aggregation"] = mapping[strategy]
        if count > 1:
            rep.map(f"trials: {count} (strategy {strategy} -> {mapping[strategy]})")
        if strategy == "confidence_interval":
            rep.approx("trials.strategy: confidence_interval", "scored as the mean of the trials (the 95% lower "
                                                               "bound is not computed)")
        return out

    def suite_asserts(self, suite) -> list[tuple[Any, Any, Any, tuple]]:
        items = []
        for key in ("assert", "assertions"):
            if key in suite:
                items.extend(self.assert_list(suite, key, (key,)))
        execution = suite.get("execution")
        if isinstance(execution, dict):
            for key in ("assert", "assertions", "evaluators"):
                if key in execution:
                    if key == "evaluators":
                        self.warn("`execution.evaluators` is AgentV's legacy name; write `assert:` at the suite level",
                                  execution, key, ("execution", key), code="deprecated", at_key=True)
                    items.extend(self.assert_list(execution, key, ("execution", key)))
        if "evaluators" in suite:
            items.extend(self.assert_list(suite, "evaluators", ("evaluators",)))
        return items

    def assert_list(self, holder, key, path) -> list[tuple[Any, Any, Any, tuple]]:
        value = holder[key]
        if value is None:
            return []
        if not isinstance(value, list):
            self.error(f"`{key}` must be a list of assertions (`- type: ...`)", holder, key, path, code="type")
            return []
        return [(item, value, i, (*path, i)) for i, item in enumerate(value)]

    def read_suite_input(self, suite) -> list[Message] | None:
        for key in ("input_messages", "input"):
            if key in suite and suite[key] is not None:
                return self.read_input(suite, key, (key,), TestReport("(suite)"))
        return None

    # --- tests -------------------------------------------------------------------------------------

    def read_tests_field(self, suite) -> list[tuple[Any, Any, Any, tuple]]:
        key = next((k for k in ("tests", "eval_cases", "evalcases") if k in suite), None)
        if key is None:
            self.error("an AgentV suite needs `tests`", suite, None, (), "add `tests:` with `- id: ...` items", "tests")
            return []
        if key != "tests":
            self.warn(f"`{key}` is AgentV's legacy name for `tests`", suite, key, (key,), "rename it to `tests`",
                      "deprecated", at_key=True)
        value = suite[key]
        if isinstance(value, str):
            return self.external_tests(value, suite, key, (key,))
        if not isinstance(value, list):
            self.error(f"`{key}` must be a list of tests or the path of a tests file", suite, key, (key,), code="type")
            return []
        rows = []
        for index, item in enumerate(value):
            if isinstance(item, str):
                rows.extend(self.external_tests(item, value, index, (key, index)))
            else:
                rows.append((item, value, index, (key, index)))
        return rows

    def external_tests(self, name: str, holder, key, path) -> list:
        relative = normalize_relative(name)
        if relative is None:
            self.error(f"tests file '{name}' is a drive path; write it relative to the suite", holder, key, path,
                       code="tests")
            return []
        case_files = self.case_folder(relative)
        if case_files is not None:
            return self.folder_tests(name, relative, case_files, holder, key, path)
        pattern = relative
        if any(ch in pattern for ch in "*?["):
            import fnmatch

            names = sorted(n for n in self.files if fnmatch.fnmatch(n, pattern))
            if not names:
                self.missing_file(name, holder, key, path, "no tests file matching")
            out = []
            for match in names:
                out.extend(self.external_tests(match, holder, key, path))
            return out
        lower = relative.lower()
        if not lower.endswith((".yaml", ".yml", ".jsonl", ".json", ".csv")):
            self.error(f"tests file '{name}' must be .yaml, .yml, .jsonl or .csv", holder, key, path, code="tests")
            return []
        text = self.companion(relative)
        if text is None:
            self.missing_file(name, holder, key, path, "tests file")
            return []
        at = self.notes.position(holder, key)
        if lower.endswith(".csv"):
            rows, locator = csv_rows(text)
        else:
            loaded, _ = self.load_companion(relative, holder, key, path)
            if loaded is None:
                return []
            locator = loaded.locator
            doc = loaded.documents[0] if loaded.documents else []
            rows = doc.get("tests") if isinstance(doc, dict) else doc
            if not isinstance(rows, list):
                self.error(f"tests file '{name}' must hold a list of tests", holder, key, path, code="tests")
                return []
        self.suite_report.map(f"tests from {relative}")
        return [(row, rows, i, (relative, i), External(relative, locator, at)) for i, row in enumerate(rows)]

    def case_folder(self, relative: str) -> list[str] | None:
        """The ``<folder>/<case>/case.yaml`` files of ``tests: ./folder/``, or None when ``relative`` is no folder."""
        if relative.lower().endswith((".yaml", ".yml", ".jsonl", ".json", ".csv")):
            return None
        prefix = relative.rstrip("/") + "/"
        found = sorted(n for n in self.files if n.startswith(prefix) and n.count("/") == prefix.count("/") + 1
                       and n.rsplit("/", 1)[1] in ("case.yaml", "case.yml"))
        return found or None

    def folder_tests(self, name, relative, case_files, holder, key, path) -> list:
        """AgentV 4's test folder: each subfolder's ``case.yaml`` is one test, its id the folder's name unless given."""
        at = self.notes.position(holder, key)
        out = []
        for file_name in case_files:
            loaded, _ = self.load_companion(file_name, holder, key, path)
            if loaded is None:
                continue
            doc = loaded.documents[0] if loaded.documents else None
            if not isinstance(doc, dict):
                self.error(f"{file_name} must hold one test (a mapping), as AgentV requires", holder, key, path,
                           code="tests")
                continue
            if doc.get("id") is None:
                doc["id"] = file_name.rsplit("/", 2)[-2]
            out.append((doc, [doc], 0, (file_name,), External(file_name, loaded.locator, at)))
        self.suite_report.map(f"tests from the folder {relative}/ (one per case.yaml)")
        return out

    def read_test(self, row, holder, key, path, rep: TestReport, defaults, default_asserts, suite_input):
        if not isinstance(row, dict):
            self.error(f"a test must be a mapping with `id` and `input`, not {short(row)}", holder, key, path,
                       "write `- id: my-test` with `input: ...` and `criteria: ...`", "test")
            return None
        errors_before = sum(d.is_error for d in self.diagnostics)
        rep.line = self.position_of(row)[0]
        for k in row:
            if k not in TEST_KEYS:
                self.warn(f"unknown key `{k}` in a test; it is kept aside, not used", row, k, (*path, k),
                          self._hint(k, TEST_KEYS), "unknown-key", at_key=True)
                self.extras.setdefault("tests", {}).setdefault(str(row.get("id")), {})[k] = row[k]
        test_id = row.get("id")
        if not (isinstance(test_id, str) and test_id.strip()) and not is_number(test_id):
            self.error("each test needs an `id` (unique text)", row, "id" if "id" in row else None, (*path, "id"),
                       "add `id: my-test`", "test-id")
            test_id = None
        else:
            test_id = str(test_id)
            rep.id = test_id
            rep.map("id")
        prompt = Prompt.model_construct(
            id=test_id or f"test-{key}", id_was_generated=False, description=None, messages=[], ideal_response=None,
            system=None, system_set=False, citation=None, weight=None, render_as="markdown", temperature=None,
            no_cache=defaults.get("no_cache"), required_tools=None, prohibited_tools=None, max_calls=None, tags=None,
            points=[], should_not=None, origin=self.origin(row, None, path), verdicts=defaults["verdicts"], checks=[],
            trials=defaults["trials"], trial_aggregation=defaults["trial_aggregation"], trial_threshold=None,
        )
        if isinstance(row.get("description"), str):
            prompt.description = row["description"]
            rep.map("description")
        for extra_key in ("metadata", "conversation_id", "note"):
            if extra_key in row:
                self.extras.setdefault("tests", {}).setdefault(prompt.id, {})[extra_key] = row[extra_key]
                if extra_key == "note":
                    rep.approx("note", "kept aside: judges do not see it")
                else:
                    rep.map(f"{extra_key} (kept aside)")
        criteria = self.read_criteria(row, path, rep)
        skip_defaults = bool(row.get("skip_defaults"))
        execution = row.get("execution")
        if execution is not None and not isinstance(execution, dict):
            self.error("`execution` must be a mapping", row, "execution", (*path, "execution"), code="type")
            execution = None
        if isinstance(execution, dict):
            skip_defaults = skip_defaults or bool(execution.get("skip_defaults"))
            self.read_test_execution(execution, (*path, "execution"), prompt, rep)
        if "threshold" in row:
            prompt.verdicts = self.read_threshold(row, path) or prompt.verdicts
        # input
        messages = None
        if row.get("input") is not None and row.get("input_messages") is not None:
            self.warn("`input` and `input_messages` both given; `input_messages` (the canonical name) is used "
                      "and `input` is ignored", row, "input", (*path, "input"), code="alias-conflict", at_key=True)
        for input_key in ("input_messages", "input"):
            if input_key in row and row[input_key] is not None:
                messages = self.read_input(row, input_key, (*path, input_key), rep)
                if input_key == "input_messages" and "input" not in row:
                    rep.map("input_messages")
                else:
                    rep.map(input_key)
                break
        if messages is None and not any(k in row for k in ("input", "input_messages")):
            self.error("each test needs a non-empty `input`", row, None, path,
                       "add `input: your question` or a list of `{role, content}` messages", "input")
        if "input_files" in row:
            rep.unsupported_("input_files", NOT_AN_AGENT)
        if suite_input and not skip_defaults:
            messages = [*suite_input, *(messages or [])]
            rep.map("suite input prepended")
        prompt.messages = self.finish_conversation(messages or [], rep)
        # expected output
        expected = self.read_expected(row, path, rep)
        if expected is not None:
            prompt.ideal_response = expected["reference"]
        self.expected = expected
        self.criteria = criteria
        self.question = "\n\n".join(m.content or "" for m in prompt.messages if m.role == "user")
        # evaluators
        own = []
        for assert_key in ("assert", "assertions", "evaluators"):
            if assert_key in row:
                if assert_key == "evaluators":
                    self.warn("`evaluators` is AgentV's legacy name; write `assert:`", row, assert_key,
                              (*path, assert_key), code="deprecated", at_key=True)
                own.extend(self.assert_list(row, assert_key, (*path, assert_key)))
        if isinstance(execution, dict) and "evaluators" in execution:
            self.warn("`execution.evaluators` is AgentV's legacy name; write `assert:` on the test", execution,
                      "evaluators", (*path, "execution", "evaluators"), code="deprecated", at_key=True)
            own.extend(self.assert_list(execution, "evaluators", (*path, "execution", "evaluators")))
        items = []
        if "rubrics" in row and row["rubrics"] is not None:
            items.append(("rubrics-field", row, "rubrics", (*path, "rubrics")))
        items.extend(own)
        if default_asserts and not skip_defaults:
            items.extend(("suite", *entry) for entry in default_asserts)
            rep.map("suite assertions")
        elif default_asserts:
            rep.map("skip_defaults")
        points: list[Point] = []
        # AgentV 3.0 onward: plain strings among the assertions are one rubric evaluator, weighted by their count.
        plain = [entry for entry in items if entry[0] not in ("rubrics-field", "suite") and isinstance(entry[0], str)]
        if plain:
            _, container, index, ipath = plain[0]
            rep.map("plain-text assertions -> one rubric evaluator")
            points.extend(self.rubrics_points([entry[0] for entry in plain], container, index, ipath,
                                              float(len(plain)), None, False, prompt, rep, source="assertions"))
            items = [entry for entry in items if not any(entry is other for other in plain)]
        for entry in items:
            if entry[0] == "rubrics-field":
                _, holder_, rkey, rpath = entry
                points.extend(self.rubrics_points(holder_[rkey], holder_, rkey, rpath, 1.0, None, False, prompt, rep,
                                                  source="rubrics"))
                continue
            if entry[0] == "suite":
                _, item, container, index, ipath = entry
                saved, self.external = self.external, None  # suite assertions are located in the suite itself
                try:
                    points.extend(self.assertion(item, container, index, ipath, prompt, rep, 1.0, None))
                finally:
                    self.external = saved
                continue
            item, container, index, ipath = entry
            points.extend(self.assertion(item, container, index, ipath, prompt, rep, 1.0, None))
        if not items:
            if criteria:
                points.append(judged_point(criteria, weight=1.0, origin=self.origin(row, "criteria", path),
                                           label="criteria"))
                rep.approx("criteria", "no assertions, so one judged point states the criteria (AgentV's default "
                                       "free-form judge gives a 0-1 score; ours judges on its scale)")
            elif expected is None:
                self.error("a test needs `criteria`, `expected_output` or `assert` to be scored", row, "id", path,
                           "add `criteria: what a good answer does`", "test")
        elif criteria:
            rep.map("criteria (context for judges)")
        prompt.points = points
        if expected is not None and not points:
            rep.approx("expected_output", "with nothing else to score, similarity to the expected output scores the "
                                          "test (needs an embeddings model)")
        if sum(d.is_error for d in self.diagnostics) > errors_before:
            return None
        return prompt

    def read_criteria(self, row, path, rep: TestReport) -> str | None:
        present = [k for k in ("criteria", "expected_outcome", "outcome") if k in row and row[k] is not None]
        if not present:
            return None
        key = present[0]
        value = row[key]
        if not isinstance(value, str) or not value.strip():
            self.error(f"`{key}` must be non-empty text", row, key, (*path, key), code="type")
            return None
        if key == "expected_outcome":
            self.warn("`expected_outcome` is AgentV's legacy name for `criteria`", row, key, (*path, key),
                      "rename it to `criteria`", "deprecated", at_key=True)
        for other in present[1:]:
            self.warn(f"`{key}` and `{other}` both given; `{key}` is used", row, other, (*path, other),
                      code="alias-conflict", at_key=True)
        rep.map(f"{key} -> criteria")
        return value.strip()

    def read_test_execution(self, execution, path, prompt: Prompt, rep: TestReport):
        for key in ("target", "targets"):
            if key in execution:
                rep.unsupported_(f"execution.{key}", "a per-test choice of target: every test runs on the run's "
                                                     "models")
                self.extras.setdefault("tests", {}).setdefault(prompt.id, {})[f"execution.{key}"] = execution[key]
        if "trials" in execution:
            values = self.read_trials(execution, path, rep)
            for k, v in values.items():
                setattr(prompt, k, v)
        if "cache" in execution and isinstance(execution["cache"], bool):
            prompt.no_cache = not execution["cache"]
            rep.map("execution.cache")
        for key in ("timeout_seconds", "total_budget_usd", "fail_on_error"):
            if key in execution:
                rep.unsupported_(f"execution.{key}", "run policy evalsite does not have; kept aside")

    # --- messages ----------------------------------------------------------------------------------

    def read_input(self, holder, key, path, rep: TestReport) -> list[Message] | None:
        value = holder[key]
        if is_number(value) or isinstance(value, bool):
            self.error(f"`{key}` must be text or a list of `{{role, content}}` messages, not {short(value)}", holder,
                       key, path, "quote it: `input: \"123\"`", "type")
            return None
        if isinstance(value, str):
            text = value
            if not text.strip():
                self.error(f"`{key}` cannot be empty", holder, key, path, code="empty")
                return None
            return [Message(role="user", content=text)]
        if isinstance(value, dict):
            value = [value]
            holder = {key: value}
        if not isinstance(value, list) or not value:
            self.error(f"`{key}` must be text or a non-empty list of `{{role, content}}` messages", holder, key, path,
                       code="type")
            return None
        out = []
        for index, item in enumerate(value):
            message = self.read_message_item(item, value, index, (*path, index), rep)
            if message is not None:
                out.append(message)
        return out

    def read_message_item(self, item, holder, index, path, rep: TestReport) -> Message | None:
        if not isinstance(item, dict):
            self.error(f"a message must be a mapping with `role` and `content`, not {short(item)}", holder, index, path,
                       code="message")
            return None
        role = item.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            self.error(f"message role must be system, user, assistant or tool, not {role!r}", item,
                       "role" if "role" in item else None, (*path, "role"),
                       choice_hint(role, ("system", "user", "assistant", "tool")), "message")
            return None
        for k in item:
            if k not in ("role", "content", "tool_calls", "tool_call_id", "name"):
                self.warn(f"unknown key `{k}` in a message; it is ignored", item, k, (*path, k), code="unknown-key",
                          at_key=True)
        if role == "tool":
            rep.unsupported_("tool messages in the input", "tool results in a conversation are not sent to models "
                                                           "(evalsite's tool use is trace-only)")
            return None
        if item.get("tool_calls"):
            rep.unsupported_("tool_calls in input messages", "earlier tool calls are not replayed to the model")
        content = self.read_content(item, path, rep)
        if content is None:
            return None
        return Message(role=role, content=content)

    def read_content(self, item, path, rep: TestReport) -> str | None:
        value = item.get("content")
        cpath = (*path, "content")
        if isinstance(value, str) or is_number(value):
            text = str(value)
        elif isinstance(value, dict) and "type" not in value:
            text = json.dumps(value, ensure_ascii=False)
        elif isinstance(value, list) or (isinstance(value, dict) and "type" in value):
            blocks = value if isinstance(value, list) else [value]
            parts = []
            for index, block in enumerate(blocks):
                bpath = (*cpath, index)
                if isinstance(block, str):
                    parts.append(block)
                    continue
                if not isinstance(block, dict) or block.get("type") not in ("text", "file", "image", "json"):
                    self.error("a content block is `{type: text|file|image|json, value}`", blocks, index, bpath,
                               code="content")
                    continue
                kind, body = block["type"], block.get("value")
                if kind == "text":
                    parts.append(str(body or ""))
                elif kind == "json":
                    parts.append(json.dumps(body, ensure_ascii=False))
                elif kind == "image":
                    rep.unsupported_("image content blocks", "images are not sent to models")
                else:
                    if not isinstance(body, str):
                        self.error("a file block needs `value: path/to/file`", block, "value", (*bpath, "value"),
                                   code="content")
                        continue
                    text = self.companion(body)
                    if text is None:
                        self.file_not_found(body, block, "value", (*bpath, "value"), "input")
                        continue
                    parts.append(f"File: {normalize_relative(body)}\n```\n{text.rstrip()}\n```")
                    rep.approx("file content blocks", "the file's text is put into the message")
            text = "\n\n".join(p for p in parts if p)
        elif value is None and item.get("role") == "assistant" and item.get("tool_calls"):
            text = ""
        else:
            self.error("`content` must be text or a list of content blocks", item, "content" if "content" in item
                       else None, cpath, code="content")
            return None
        if not text.strip():
            self.error("a message's content cannot be empty", item, "content" if "content" in item else None, cpath,
                       code="empty")
            return None
        return text

    def finish_conversation(self, messages: list[Message], rep: TestReport) -> list[Message]:
        """Turns of one role in a row are joined; a conversation ending with the assistant gets a turn to generate."""
        out: list[Message] = []
        for message in messages:
            if out and out[-1].role == message.role and message.role != "system":
                out[-1] = Message(role=message.role, content=f"{out[-1].content}\n\n{message.content}")
                rep.approx("consecutive messages of one role", "joined into one turn")
            else:
                out.append(message)
        if out and out[-1].role == "assistant":
            out.append(Message(role="assistant", content=None))
            rep.approx("input ending with an assistant turn", "the model still answers after it")
        return out

    def read_expected(self, row, path, rep: TestReport) -> dict | None:
        present = [k for k in ("expected_messages", "expected_output") if k in row and row[k] is not None]
        if not present:
            return None
        key = present[0]
        if len(present) > 1:
            self.warn("`expected_output` and `expected_messages` both given; `expected_messages` (the canonical name) "
                      "is used and `expected_output` is ignored", row, "expected_output",
                      (*path, "expected_output"), code="alias-conflict", at_key=True)
        value = row[key]
        epath = (*path, key)
        if isinstance(value, str) or is_number(value):
            rep.map(f"{key} -> ideal")
            return {"reference": str(value), "structured": None, "messages": [{"role": "assistant",
                                                                                "content": str(value)}]}
        if isinstance(value, dict) and "role" not in value:
            rep.approx(f"{key} (structured)", "kept as the ideal (its JSON) and used by field_accuracy")
            return {"reference": json.dumps(value, ensure_ascii=False), "structured": value,
                    "messages": [{"role": "assistant", "content": value}]}
        if _content_blocks(value):
            # `expected_output: [{type: file, value: ./x.md}]`: one assistant message of content blocks (AgentV).
            value = {"role": "assistant", "content": value}
            holder, hkey = {key: value}, key
        else:
            holder, hkey = row, key
        items = value if isinstance(value, list) else [value]
        messages = []
        for index, item in enumerate(items):
            ipath = (*epath, index)
            if not isinstance(item, dict) or item.get("role") not in ("system", "user", "assistant", "tool"):
                self.error("an expected message needs `role` (system, user, assistant or tool)", items, index, ipath,
                           code="message")
                continue
            if _content_blocks(item.get("content")):
                blocks_at = (item, "content", (*ipath, "content")) if isinstance(value, list) else \
                    (holder, hkey, epath)
                item = {**item, "content": self.expected_blocks_text(item["content"], *blocks_at, rep)}
            calls = item.get("tool_calls")
            if calls is not None:
                if not isinstance(calls, list):
                    self.error("`tool_calls` must be a list", item, "tool_calls", (*ipath, "tool_calls"), code="type")
                    continue
                for cindex, call in enumerate(calls):
                    name = call.get("tool") if isinstance(call, dict) else None
                    if name is None and isinstance(call, dict) and isinstance(call.get("function"), dict):
                        name = call["function"].get("name")
                    if not isinstance(name, str) or not name:
                        self.error("each expected tool call needs `tool` (its name)", calls, cindex,
                                   (*ipath, "tool_calls", cindex), "write `- tool: search` with optional `input`",
                                   "tool-call")
            messages.append(item)
        last = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
        reference, structured = "", None
        if last is not None:
            content = last.get("content")
            if isinstance(content, (dict, list)):
                structured = content
                reference = json.dumps(content, ensure_ascii=False)
            elif content is not None:
                reference = str(content)
            elif last.get("tool_calls"):
                reference = json.dumps(last["tool_calls"], ensure_ascii=False, default=str)
        rep.map(f"{key} -> ideal (last assistant message)")
        if any(m.get("tool_calls") for m in messages):
            rep.approx("expected tool_calls", "kept in the ideal for judges; not matched (use tool_trajectory)")
        return {"reference": reference, "structured": structured, "messages": messages}

    def expected_blocks_text(self, content, holder, key, path, rep: TestReport) -> str:
        """Expected-output content blocks as AgentV gives them to graders: text as is, each file's text (a file
        that is not there is a warning and left out); with files and more than one block, each file is wrapped
        in ``<file path="...">``."""
        blocks = content if isinstance(content, list) else [content]
        parts: list[tuple[str, str | None]] = []
        for index, block in enumerate(blocks):
            if isinstance(block, str):
                parts.append((block, None))
            elif block.get("type") == "file":
                body = block.get("value")
                text = self.companion(body) if isinstance(body, str) else None
                if text is None:
                    self.file_not_found(str(body), blocks, index, (*path, index), "expected output")
                    continue
                parts.append((text.replace("\r\n", "\n").strip(), normalize_relative(body)))
                rep.map("expected_output file -> ideal (the file's text)")
            elif block.get("type") == "text":
                parts.append((str(block.get("value") or block.get("text") or ""), None))
            elif block.get("type") == "json":
                parts.append((json.dumps(block.get("value"), ensure_ascii=False), None))
            else:
                rep.unsupported_(f"{block.get('type')} blocks in expected output", "left out of the ideal")
        if len(parts) == 1:
            return parts[0][0]
        if any(name for _, name in parts):
            return "\n\n".join(f'<file path="{name}">\n{text}\n</file>' if name else text for text, name in parts)
        return " ".join(text for text, _ in parts)

    # --- assertions --------------------------------------------------------------------------------

    def common_fields(self, item, path) -> tuple[float | None, float | None, bool, bool]:
        """(weight, gate, negate, ok) of an assertion."""
        ok = True
        weight = 1.0
        if "weight" in item:
            value = item["weight"]
            if not is_number(value) or not math.isfinite(value) or value < 0:
                self.error(f"`weight` must be a finite number >= 0, not {short(value)}", item, "weight",
                           (*path, "weight"), "weights are relative: 1 is the default, 0 leaves the assertion out of "
                                              "the score", "weight")
                ok = False
            else:
                weight = float(value)
        gate = None
        if "required" in item and item["required"] is not None and item["required"] is not False:
            value = item["required"]
            if value is True:
                gate = PASS_MARK
            elif is_number(value) and 0 < value <= 1:
                gate = float(value)
            else:
                self.error(f"`required` must be true or a minimum score above 0 and at most 1, not {short(value)}",
                           item, "required", (*path, "required"),
                           "`required: true` gates at 0.8; `required: 0.6` at 0.6", "gate")
                ok = False
        negate = item.get("negate", False)
        if not isinstance(negate, bool):
            self.error("`negate` must be true or false", item, "negate", (*path, "negate"), code="type")
            ok, negate = False, False
        return weight, gate, negate, ok

    def assertion(self, item, container, index, path, prompt: Prompt, rep: TestReport, scale: float,
                  parent_check: str | None) -> list[Point]:
        """The points of one assertion, their multipliers summing to ``scale`` x its weight."""
        if not isinstance(item, dict):
            self.error(f"an assertion must be a mapping with `type`, not {short(item)}", container, index, path,
                       "write `- type: contains` with `value: ...`", "assertion")
            return []
        kind = _kind(item.get("type"))
        if kind is None:
            self.error("each assertion needs a `type`", item, None, path, "one of: " + ", ".join(KNOWN_TYPES),
                       "assertion")
            return []
        weight, gate, negate, ok = self.common_fields(item, path)
        if not ok:
            return []
        name = item.get("name") if isinstance(item.get("name"), str) else None
        label = name or self.default_label(kind, item)
        check_id = parent_check or new_check(prompt.checks, label=label, kind=kind, gate=gate,
                                             preferred_id=name or kind)
        if parent_check and gate is not None:
            rep.approx(f"required inside a composite ({label})", "the composite's own gate counts, not its children's")
        origin = self.origin(container, index, path)
        total = weight * scale
        builder = BUILDERS.get(kind)
        if builder is None:
            self.warn(f"assertion type `{item.get('type')}` is not one evalsite knows (AgentV reads unknown types as "
                      "custom assertions from .agentv/assertions); it is left out", item, "type", (*path, "type"),
                      self._hint(kind, KNOWN_TYPES), "unsupported")
            rep.unsupported_(f"assertion type {item.get('type')}", "custom assertion types are code evalsite does not "
                                                                   "have")
            self.drop_check(prompt, check_id, parent_check)
            return []
        method, options = builder
        points = method(self, Assertion(item, path, origin, total, check_id, negate, prompt, rep, label), **options)
        if not points:
            self.drop_check(prompt, check_id, parent_check)
        if points and "min_score" in item:
            value = item["min_score"]
            if is_number(value) and 0 <= value <= 1:
                check = prompt.check(check_id)
                if check is not None and check.gate is None:
                    check.min_score = float(value)
            else:
                self.error("`min_score` must be a number from 0 to 1", item, "min_score", (*path, "min_score"),
                           code="min-score")
        return points

    def drop_check(self, prompt: Prompt, check_id: str, parent_check: str | None):
        if parent_check is None:
            prompt.checks = [c for c in prompt.checks if c.id != check_id]

    def default_label(self, kind, item) -> str:
        value = item.get("value")
        if value is not None and kind in ("contains", "icontains", "starts_with", "ends_with", "equals", "regex",
                                          "contains_any", "contains_all", "icontains_any", "icontains_all"):
            return f"{kind}: {short(value, 40)}"
        return kind

    def unknown_item_keys(self, item, path, known):
        allowed = COMMON_ITEM_KEYS | set(known)
        for k in item:
            if k not in allowed:
                self.warn(f"unknown key `{k}` in a `{item.get('type')}` assertion; it is ignored", item, k, (*path, k),
                          self._hint(k, allowed), "unknown-key", at_key=True)

    def _value(self, item, path, want_list=False):
        value = item.get("value")
        if want_list:
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                return value
            self.error(f"`{item.get('type')}` needs `value:` as a list of text", item, "value" if "value" in item
                       else None, (*path, "value"), code="value")
            return None
        if isinstance(value, str) or is_number(value):
            return str(value)
        self.error(f"`{item.get('type')}` needs `value:` (text)", item, "value" if "value" in item else None,
                   (*path, "value"), f"e.g. `value: \"DENIED\"`", "value")
        return None

    def _fn(self, fn, args, origin, weight, check_id, negate, label):
        return [function_point(fn, args, weight=weight, origin=origin, check_id=check_id, inverted=negate,
                               label=label)]

    def build_contains(self, a: Assertion, fn="contains"):
        item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
        rep, label = a.rep, a.label
        self.unknown_item_keys(item, path, ("value",))
        value = self._value(item, path)
        if value is None:
            return []
        rep.map(f"{item['type']} -> ${'not_' if negate else ''}{fn}")
        return self._fn(("not_" if negate else "") + fn, value, origin, weight, check_id, False, label)

    def build_contains_any(self, a: Assertion, fn="contains_any_of"):
        item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
        rep, label = a.rep, a.label
        self.unknown_item_keys(item, path, ("value",))
        values = self._value(item, path, want_list=True)
        if values is None:
            return []
        rep.map(f"{item['type']} -> ${'not_' if negate else ''}{fn}")
        return self._fn(("not_" if negate else "") + fn, values, origin, weight, check_id, False, label)


    def _js_check(self, expression, origin, weight, check_id, negate, label):
        return self._fn("js", f"!({expression})" if negate else expression, origin, weight, check_id, False, label)

    def build_contains_all(self, a: Assertion, lower=False):
        item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
        rep, label = a.rep, a.label
        self.unknown_item_keys(item, path, ("value",))
        values = self._value(item, path, want_list=True)
        if values is None:
            return []
        subject = "r.toLowerCase()" if lower else "r"
        wanted = json.dumps([v.lower() for v in values] if lower else values, ensure_ascii=False)
        rep.map(f"{item['type']} -> $js (every value, all or nothing)")
        return self._js_check(f"{wanted}.every(v => {subject}.includes(v))", origin, weight, check_id, negate, label)

    def build_starts_with(self, a: Assertion, method="startsWith"):
        item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
        rep, label = a.rep, a.label
        self.unknown_item_keys(item, path, ("value",))
        value = self._value(item, path)
        if value is None:
            return []
        rep.map(f"{item['type']} -> $js (both sides trimmed, as AgentV)")
        return self._js_check(f"r.trim().{method}({json.dumps(value.strip(), ensure_ascii=False)})", origin, weight,
                              check_id, negate, label)

    def build_equals(self, a: Assertion):
        item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
        rep, label = a.rep, a.label
        self.unknown_item_keys(item, path, ("value",))
        value = self._value(item, path)
        if value is None:
            return []
        rep.map(f"{item['type']} -> $equals (trimmed)")
        return self._fn("equals", value, origin, weight, check_id, negate, label)

    def build_regex(self, a: Assertion):
        item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
        rep, label = a.rep, a.label
        from ..jsregex import RegexError, compile_js

        self.unknown_item_keys(item, path, ("value", "flags"))
        value = self._value(item, path)
        if value is None:
            return []
        flags = item.get("flags") or ""
        if not isinstance(flags, str) or not re.fullmatch(r"[dgimsuvy]*", flags):
            self.error("`flags` must be JavaScript regex flags such as `i` or `ms`", item, "flags", (*path, "flags"),
                       code="regex")
            return []
        try:
            compile_js(value, ignore_case="i" in flags)
        except RegexError as exc:
            self.error(f"the regex does not compile: {exc.message}", item, "value", (*path, "value"),
                       "fix the pattern", "regex")
            return []
        rep.map(f"{item['type']} -> $matches")
        if flags in ("", "i", "g", "gi", "ig"):
            fn = ("not_" if negate else "") + ("imatches" if "i" in flags else "matches")
            return self._fn(fn, value, origin, weight, check_id, False, label)
        expression = f"new RegExp({json.dumps(value)}, {json.dumps(flags.replace('g', ''))}).test(r)"
        return self._js_check(expression, origin, weight, check_id, negate, label)

    def build_is_json(self, a: Assertion):
        item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
        rep, label = a.rep, a.label
        self.unknown_item_keys(item, path, ())
        rep.map("is_json -> $js (any JSON value, as AgentV)")
        return self._js_check("(() => { try { JSON.parse(r); return true } catch (e) { return false } })()", origin,
                              weight, check_id, negate, label)

    # rubrics

    def build_rubrics(self, a: Assertion):
        item, path, weight, check_id, negate, prompt = a.item, a.path, a.weight, a.check_id, a.negate, a.prompt
        rep = a.rep
        self.unknown_item_keys(item, path, ("criteria", "rubrics", "model"))
        key = "criteria" if "criteria" in item else ("rubrics" if "rubrics" in item else None)
        if key is None:
            self.error("a `rubrics` assertion needs `criteria:` (a list of rubric items)", item, None, path,
                       "add `criteria:` with `- id: ...` and `outcome: ...` items", "rubrics")
            return []
        if "model" in item:
            rep.approx("rubric judge model", "the run's judges judge every criterion")
        return self.rubrics_points(item[key], item, key, (*path, key), weight, check_id, negate, prompt, rep,
                                   source="rubrics")

    def build_rubric(self, a: Assertion):
        item, path = a.item, a.path
        self.warn("`type: rubric` is AgentV's deprecated name; write `type: rubrics` with `criteria:`", item, "type",
                  (*path, "type"), code="deprecated")
        return self.build_rubrics(a)

    def rubrics_points(self, value, holder, key, path, weight, check_id, negate, prompt, rep, source):
        if not isinstance(value, list) or not value:
            self.error(f"`{key}` must be a non-empty list of rubric items (text, or `{{id, outcome, weight}}`)",
                       holder, key, path, code="rubrics")
            return []
        if check_id is None:
            check_id = new_check(prompt.checks, label="rubrics", kind="rubrics", preferred_id="rubrics")
        items = []
        for index, rubric in enumerate(value):
            ipath = (*path, index)
            if isinstance(rubric, str):
                if not rubric.strip():
                    self.error("a rubric cannot be empty", value, index, ipath, code="rubrics")
                    continue
                items.append((rubric.strip(), 1.0, None, None, f"rubric-{index + 1}", value, index, ipath))
                continue
            if not isinstance(rubric, dict):
                self.error("a rubric item is text or `{id, outcome, weight, required, score_ranges}`", value, index,
                           ipath, code="rubrics")
                continue
            for k in rubric:
                if k not in ("id", "outcome", "weight", "required", "required_min_score", "score_ranges",
                             "description", "criteria"):
                    self.warn(f"unknown key `{k}` in a rubric item; it is ignored", rubric, k, (*ipath, k),
                              code="unknown-key", at_key=True)
            text = rubric.get("outcome", rubric.get("description", rubric.get("criteria")))
            if (not isinstance(text, str) or not text.strip()) and isinstance(rubric.get("score_ranges"), list):
                # With score_ranges the bands say what is checked; upstream makes `outcome` optional there.
                text = str(rubric.get("id") or f"rubric {index + 1}")
            if not isinstance(text, str) or not text.strip():
                self.error("a rubric item needs `outcome:` (what it checks)", rubric, None, ipath,
                           "add `outcome: ...`, or `score_ranges:` whose bands say what is checked", "rubrics")
                continue
            inner = rubric.get("weight", 1.0)
            if not is_number(inner) or not math.isfinite(inner) or inner < 0:
                self.error(f"`weight` must be a finite number >= 0, not {short(inner)}", rubric, "weight",
                           (*ipath, "weight"), code="weight")
                continue
            bands = None
            if rubric.get("score_ranges") is not None:
                bands, problems = read_score_ranges(rubric["score_ranges"])
                for message, where, hint in problems:
                    self.error(message, rubric, "score_ranges", (*ipath, "score_ranges"), hint, "score-ranges")
                if problems:
                    continue
                if uncovered(bands):
                    self.warn("the score bands leave scores " + ", ".join(map(str, uncovered(bands))) +
                              " without a description", rubric, "score_ranges", (*ipath, "score_ranges"),
                              code="score-ranges")
                rep.map("score_ranges (0-10 bands)")
            minimum = None
            required = rubric.get("required")
            if rubric.get("required_min_score") is not None:
                n = rubric["required_min_score"]
                if isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= 10:
                    minimum = n / 10
                else:
                    self.error("`required_min_score` must be a whole number from 0 to 10", rubric,
                               "required_min_score", (*ipath, "required_min_score"), code="rubrics")
                    continue
            elif required is True:
                minimum = 1.0 if bands else PASS_MARK
            elif required is not None and required is not False:
                self.error("a rubric item's `required` is true or false", rubric, "required", (*ipath, "required"),
                           "use `required_min_score: 7` for a minimum on a 0-10 band", "rubrics")
                continue
            if minimum is not None:
                rep.approx("required rubric item", "fails the verdict when missed; the score is not zeroed "
                                                   "(AgentV's rubric-level required)")
            rid = rubric.get("id") if isinstance(rubric.get("id"), str) else f"rubric-{index + 1}"
            items.append((text.strip(), float(inner), minimum, bands, rid, value, index, ipath))
        total = sum(i[1] for i in items)
        points = []
        for text, inner, minimum, bands, rid, container, index, ipath in items:
            share = weight * (inner / total) if total > 0 else 0.0
            points.append(judged_point(text, weight=share, origin=self.origin(container, index, ipath),
                                       check_id=check_id, inverted=negate, label=rid, min_score=minimum,
                                       score_ranges=bands))
        if points:
            rep.map(f"{source} -> judged points")
        return points

    def build_llm_judge(self, a: Assertion):
        item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
        prompt, rep, label = a.prompt, a.rep, a.label
        self.unknown_item_keys(item, path, ("prompt", "rubrics", "criteria", "model", "config", "target",
                                            "judge_target", "max_steps", "temperature"))
        if "model" in item or "judge_target" in item:
            rep.approx("judge model", "the run's judges judge this point")
        if item.get("rubrics"):
            return self.rubrics_points(item["rubrics"], item, "rubrics", (*path, "rubrics"), weight, check_id, negate,
                                       prompt, rep, source="llm_judge rubrics")
        template = item.get("prompt")
        if isinstance(template, dict):
            rep.unsupported_(f"llm_judge {label}: prompt builder command", "a command that prints the judge prompt "
                                                                          "runs code; not supported")
            return []
        if template is None:
            if not self.criteria:
                self.error("an `llm_judge` needs `prompt:` (a file or text), `rubrics:`, or the test's `criteria`",
                           item, None, path, code="llm-judge")
                return []
            rep.approx(f"llm_judge {label}", "one judged point states the criteria (judged on evalsite's scale)")
            return [judged_point(self.criteria, weight=weight, origin=origin, check_id=check_id, inverted=negate,
                                 label=label)]
        if not isinstance(template, str) or not template.strip():
            self.error("`prompt` must be a file path or the judge's instructions", item, "prompt", (*path, "prompt"),
                       code="llm-judge")
            return []
        text = template
        looks_like_file = "\n" not in template and re.search(r"\.(md|txt|prompt|j2|jinja)$", template.strip(), re.I)
        if looks_like_file or normalize_relative(template) in self.files:
            loaded = self.companion(template)
            if loaded is None:
                self.missing_file(template, item, "prompt", (*path, "prompt"), "judge prompt file")
                return []
            text = loaded
        variables = set(TEMPLATE_VARIABLE.findall(text))
        if variables and not variables & {"answer", "candidate_answer", "expected_output", "output"}:
            self.error("a custom judge prompt must use `{{ answer }}` (or `{{ expected_output }}`)", item, "prompt",
                       (*path, "prompt"), "AgentV rejects a judge prompt that never shows the answer", "llm-judge")
            return []
        criterion = self.render_judge_prompt(text)
        rep.approx(f"llm_judge {label}", "the custom judge prompt is filled in once and judged as one criterion on "
                                         "evalsite's scale (the response is shown to the judge as usual)")
        return [judged_point(criterion, weight=weight, origin=origin, check_id=check_id, inverted=negate,
                             label=label)]

    def render_judge_prompt(self, text: str) -> str:
        expected = self.expected or {}
        values = {
            "criteria": self.criteria or "",
            "question": self.question,
            "input": self.question,
            "reference_answer": expected.get("reference") or "",
            "expected_output": expected.get("reference") or "",
            "answer": "[the response]",
            "candidate_answer": "[the response]",
            "output": "[the response]",
            "file_changes": "",
        }
        return TEMPLATE_VARIABLE.sub(lambda m: values.get(m.group(1), m.group(0)), text).strip()

    def build_agent_judge(self, a: Assertion):
        item, path, rep, label = a.item, a.path, a.rep, a.label
        rep.unsupported_(f"agent_judge {label}", "an agentic judge works in the agent's workspace; " + NOT_AN_AGENT)
        self.warn("`agent_judge` needs an agent's workspace; it is left out", item, "type", (*path, "type"),
                  code="unsupported")
        return []

    def build_code_judge(self, a: Assertion):
        item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
        rep, label = a.rep, a.label
        self.unknown_item_keys(item, path, ("script", "command", "cwd", "target", "config", "timeout_s"))
        key = "command" if "command" in item else ("script" if "script" in item else None)
        if key is None:
            self.error("a `code_judge` needs `command:` (or `script:`) as a list of program and arguments", item, None,
                       path, 'e.g. `command: ["python", "judges/check.py"]`', "code-judge")
            return []
        value = item[key]
        if isinstance(value, str) and value.strip():
            try:
                argv = shlex.split(value)
            except ValueError as exc:
                self.error(f"the command cannot be split into arguments: {exc}", item, key, (*path, key),
                           "write it as a list: [program, arg, ...]", "code-judge")
                return []
            rep.approx(f"code_judge {label}: command as text", "split into arguments as a POSIX shell would; it never "
                                                               "runs through a shell")
        elif isinstance(value, list) and value and all(isinstance(t, str) and t for t in value):
            argv = list(value)
        else:
            self.error("the command must be a non-empty list of text: [program, arg, ...]", item, key, (*path, key),
                       code="code-judge")
            return []
        if not argv or not all(argv):
            self.error("the command must be a non-empty list of text: [program, arg, ...]", item, key, (*path, key),
                       code="code-judge")
            return []
        if len(argv) == 1 and re.search(r"\.(ts|js|mjs)$", argv[0]):
            argv = ["bun", "run", argv[0]]
            rep.approx(f"code_judge {label}: a script file alone", "run as `bun run <file>`, as AgentV does")
        elif len(argv) == 1 and argv[0].endswith(".py"):
            argv = ["python3", argv[0]]
            rep.approx(f"code_judge {label}: a script file alone", "run as `python3 <file>`")
        for token in argv[1:] + argv[:1]:
            if re.search(r"\.(ts|js|mjs|py|sh|rb)$", token) and normalize_relative(token) not in self.files:
                self.warn(f"the script '{token}' did not come with the suite; the grader will fail when it runs", item,
                          key, (*path, key), "import the suite's folder so its scripts come along", "missing-file")
            elif normalize_relative(token) in self.files:
                self.companion(token)
        if item.get("target") not in (None, False):
            rep.unsupported_(f"code_judge {label}: target", "the LLM proxy for scripts is not offered; the script "
                                                            "runs without it")
        args: dict[str, Any] = {"command": argv}
        cwd = item.get("cwd")
        if isinstance(cwd, str) and cwd.strip():
            relative = normalize_relative(cwd)
            if relative is None or relative.startswith(".."):
                self.error("`cwd` must be a folder inside the suite's folder", item, "cwd", (*path, "cwd"),
                           code="code-judge")
                return []
            args["cwd"] = relative
        if is_number(item.get("timeout_s")) and 0 < item["timeout_s"] <= 600:
            args["timeout_s"] = item["timeout_s"]
        if "config" in item:
            args["config"] = item["config"]
        args["criteria"] = self.criteria or ""
        expected = self.expected or {}
        args["reference_answer"] = expected.get("reference") or ""
        args["expected_output"] = expected.get("messages")
        rep.map(f"code_judge {label} -> $code_judge (runs only where the operator allows script graders)")
        return self._fn("code_judge", args, origin, weight, check_id, negate, label)

    def build_composite(self, a: Assertion):
        item, path, weight, check_id, negate, prompt = a.item, a.path, a.weight, a.check_id, a.negate, a.prompt
        rep, label = a.rep, a.label
        self.unknown_item_keys(item, path, ("assert", "evaluators", "assertions", "aggregator"))
        key = next((k for k in ("assert", "assertions", "evaluators") if k in item), None)
        if key is None:
            self.error("a `composite` needs `assert:` (its child assertions)", item, None, path, code="composite")
            return []
        children = self.assert_list(item, key, (*path, key))
        aggregator = item.get("aggregator") or {"type": "weighted_average"}
        if not isinstance(aggregator, dict):
            self.error("`aggregator` must be a mapping with `type`", item, "aggregator", (*path, "aggregator"),
                       code="composite")
            return []
        agg_type = _kind(aggregator.get("type")) or "weighted_average"
        weights = aggregator.get("weights") or {}
        if agg_type == "weighted_average":
            rep.map("composite (weighted_average)")
        elif agg_type == "threshold":
            rep.approx(f"composite {label}: threshold aggregator", "scored as the weighted mean of its children, not "
                                                                   "the share of children that pass")
        else:
            rep.approx(f"composite {label}: {agg_type} aggregator", "a script or LLM aggregator is not run; scored as "
                                                                    "the weighted mean of its children")
        if not isinstance(weights, dict):
            self.error("`aggregator.weights` must map child names to weights", aggregator, "weights",
                       (*path, "aggregator", "weights"), code="composite")
            return []
        named = [(c, cont, i, p, c.get("name") if isinstance(c, dict) else None) for c, cont, i, p in children]
        for wname, wvalue in weights.items():
            if not is_number(wvalue) or wvalue < 0:
                self.error(f"the weight of '{wname}' must be a number >= 0", weights, wname,
                           (*path, "aggregator", "weights", wname), code="weight")
                return []
            if wname not in {n for *_, n in named}:
                self.warn(f"`aggregator.weights` names '{wname}', which is no child's `name`", weights, wname,
                          (*path, "aggregator", "weights", wname), code="composite", at_key=True)
        shares = [float(weights.get(n, 1.0)) if n else 1.0 for *_, n in named]
        total = sum(shares)
        points = []
        for (child, container, index, cpath, _), share in zip(named, shares):
            scale = weight * (share / total) if total > 0 else 0.0
            points.extend(self.assertion(child, container, index, cpath, prompt, rep, scale, check_id))
        if negate:
            points = [p.model_copy(update={"inverted": not p.inverted}) for p in points]
        return points

    def build_tool_trajectory(self, a: Assertion):
        item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
        rep, label = a.rep, a.label
        self.unknown_item_keys(item, path, ("mode", "expected", "minimums", "args_match"))
        mode = item.get("mode")
        if mode not in TRAJECTORY_MODES_ALL:
            self.error(f"`tool_trajectory` mode must be one of any_order, in_order, exact; not {short(mode)}", item,
                       "mode" if "mode" in item else None, (*path, "mode"),
                       choice_hint(mode, TRAJECTORY_MODES_SEED) + " (later AgentV versions also read superset "
                                                                       "and subset)", "trajectory")
            return []
        args: dict[str, Any] = {"mode": mode}
        expected = item.get("expected")
        if expected is not None:
            if not isinstance(expected, list):
                self.error("`expected` must be a list of `{tool, args}`", item, "expected", (*path, "expected"),
                           code="trajectory")
                return []
            clean = []
            for index, entry in enumerate(expected):
                epath = (*path, "expected", index)
                if not isinstance(entry, dict) or not isinstance(entry.get("tool"), str) or not entry["tool"]:
                    self.error("each expected call needs `tool:` (the tool's name)", expected, index, epath,
                               code="trajectory")
                    return []
                one = {"tool": entry["tool"]}
                if entry.get("args") is not None:
                    if entry["args"] != "any" and not isinstance(entry["args"], dict):
                        self.error("`args` must be a mapping or `any`", entry, "args", (*epath, "args"),
                                   code="trajectory")
                        return []
                    one["args"] = entry["args"]
                if entry.get("args_match") is not None:
                    if entry["args_match"] not in ("exact", "superset", "subset", "ignore"):
                        rep.approx("args_match with a list of fields", "compared as `exact`")
                    else:
                        one["args_match"] = entry["args_match"]
                if "max_duration_ms" in entry:
                    rep.unsupported_("tool_trajectory max_duration_ms", "tool calls carry no timing in evalsite "
                                                                        "(they are read from the response)")
                clean.append(one)
            args["expected"] = clean
        minimums = item.get("minimums")
        if minimums is not None:
            if not isinstance(minimums, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                         for v in minimums.values()):
                self.error("`minimums` maps tool names to whole numbers of calls", item, "minimums",
                           (*path, "minimums"), code="trajectory")
                return []
            args["minimums"] = minimums
        if item.get("args_match") in ("exact", "superset", "subset", "ignore"):
            args["args_match"] = item["args_match"]
        if mode != "any_order" and not args.get("expected"):
            self.error(f"mode `{mode}` needs `expected:` (the calls, in order)", item, None, path, code="trajectory")
            return []
        if mode == "any_order" and not args.get("expected") and not args.get("minimums"):
            self.error("mode `any_order` needs `minimums:` or `expected:`", item, None, path, code="trajectory")
            return []
        rep.map(f"tool_trajectory ({mode}) -> $tool_trajectory")
        rep.approx("tool calls", "read from the TOOL_CALL lines the model writes (trace-only), not native tool "
                                 "calling")
        return self._fn("tool_trajectory", args, origin, weight, check_id, negate, label)

    def build_field_accuracy(self, a: Assertion):
        item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
        rep, label = a.rep, a.label
        self.unknown_item_keys(item, path, ("fields", "aggregation"))
        fields = item.get("fields")
        if not isinstance(fields, list) or not fields:
            self.error("`field_accuracy` needs `fields:` (a list of `{path, match}`)", item, "fields" if "fields"
                       in item else None, (*path, "fields"), code="field-accuracy")
            return []
        expected = (self.expected or {}).get("structured")
        if expected is None:
            self.error("`field_accuracy` compares with a structured `expected_output`, and this test has none", item,
                       "type", (*path, "type"), "give the test `expected_output:` as a mapping", "field-accuracy")
            return []
        clean = []
        for index, field in enumerate(fields):
            fpath = (*path, "fields", index)
            if not isinstance(field, dict) or not isinstance(field.get("path"), str):
                self.error("each field needs `path:` (dot notation, e.g. `invoice.total`)", fields, index, fpath,
                           code="field-accuracy")
                return []
            one = {k: field[k] for k in ("path", "match", "required", "weight", "tolerance", "relative", "formats")
                   if k in field}
            if one.get("match", "exact") not in ("exact", "numeric_tolerance", "date"):
                self.error("`match` must be exact, numeric_tolerance or date", field, "match", (*fpath, "match"),
                           code="field-accuracy")
                return []
            clean.append(one)
        args = {"expected": expected, "fields": clean}
        aggregation = item.get("aggregation")
        if aggregation is not None:
            if aggregation not in ("weighted_average", "all_or_nothing"):
                self.error("`aggregation` must be weighted_average or all_or_nothing", item, "aggregation",
                           (*path, "aggregation"), code="field-accuracy")
                return []
            args["aggregation"] = aggregation
        from .. import functions

        problem = functions.check_args("field_accuracy", args)
        if problem:
            self.error(problem, item, "fields", (*path, "fields"), code="field-accuracy")
            return []
        rep.map("field_accuracy -> $field_accuracy")
        return self._fn("field_accuracy", args, origin, weight, check_id, negate, label)

    def _limit(self, item, path, keys, what, positive=True):
        for key in keys:
            if key in item:
                value = item[key]
                if is_number(value) and (value > 0 if positive else value >= 0):
                    return value
                self.error(f"`{key}` must be {what}", item, key, (*path, key), code="metric")
                return None
        self.error(f"this assertion needs `{keys[0]}:` ({what})", item, None, path, code="metric")
        return None

    def build_latency(self, a: Assertion):
        item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
        rep, label = a.rep, a.label
        self.unknown_item_keys(item, path, ("threshold", "max_ms"))
        limit = self._limit(item, path, ("threshold", "max_ms"), "a number of milliseconds above 0")
        if limit is None:
            return []
        rep.map("latency -> $latency_under")
        return self._fn("latency_under", limit, origin, weight, check_id, negate, label)

    def build_cost(self, a: Assertion):
        item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
        rep, label = a.rep, a.label
        self.unknown_item_keys(item, path, ("budget", "max_usd"))
        limit = self._limit(item, path, ("budget", "max_usd"), "an amount in US dollars", positive=False)
        if limit is None:
            return []
        rep.map("cost -> $cost_under")
        return self._fn("cost_under", limit, origin, weight, check_id, negate, label)

    def build_token_usage(self, a: Assertion):
        item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
        rep, label = a.rep, a.label
        self.unknown_item_keys(item, path, ("max_total", "max_input", "max_output"))
        caps = {}
        for key, name in (("max_total", "total"), ("max_input", "input"), ("max_output", "output")):
            if key in item:
                if not is_number(item[key]) or item[key] <= 0:
                    self.error(f"`{key}` must be a number of tokens above 0", item, key, (*path, key), code="metric")
                    return []
                caps[name] = item[key]
        if not caps:
            self.error("`token_usage` needs `max_total`, `max_input` or `max_output`", item, None, path,
                       code="metric")
            return []
        rep.map("token_usage -> $tokens_under")
        rep.approx("token_usage max_total", "total is input + output tokens (cached tokens are not reported apart)")
        return self._fn("tokens_under", caps, origin, weight, check_id, negate, label)

    def build_execution_metrics(self, a: Assertion):
        item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
        rep, label = a.rep, a.label
        known = ("max_tool_calls", "max_llm_calls", "max_tokens", "max_cost_usd", "max_duration_ms",
                 "target_exploration_ratio", "exploration_tolerance")
        self.unknown_item_keys(item, path, known)
        checks = []
        mapping = (("max_tool_calls", "max_calls"), ("max_llm_calls", "llm_calls_under"),
                   ("max_tokens", "tokens_under"), ("max_cost_usd", "cost_under"),
                   ("max_duration_ms", "latency_under"))
        for key, fn in mapping:
            if key in item:
                value = item[key]
                if fn in ("max_calls", "llm_calls_under") and isinstance(value, float) and value.is_integer():
                    value = int(value)
                from .. import functions

                if functions.check_args(fn, value):
                    self.error(f"`{key}` must be a number (a whole one for counts) of at least 0", item, key,
                               (*path, key), code="metric")
                    return []
                checks.append((fn, value, key))
        if "target_exploration_ratio" in item:
            rep.unsupported_("execution_metrics target_exploration_ratio", "needs an agent's exploration trace")
        if not checks:
            if "target_exploration_ratio" not in item:
                self.error("`execution_metrics` needs at least one limit (max_tool_calls, max_llm_calls, max_tokens, "
                           "max_cost_usd, max_duration_ms)", item, None, path, code="metric")
            return []
        rep.map("execution_metrics -> metric checks (" + ", ".join(k for *_, k in checks) + ")")
        share = weight / len(checks)
        return [function_point(fn, value, weight=share, origin=origin, check_id=check_id, inverted=negate,
                               label=f"{label}: {key}") for fn, value, key in checks]


# Assertion type (after TYPE_ALIASES) -> (builder, its options). A type not here is left out with a warning.
BUILDERS: dict[str, tuple[Callable[..., list[Point]], dict[str, Any]]] = {
    "contains": (_AgentV.build_contains, {}),
    "icontains": (_AgentV.build_contains, {"fn": "icontains"}),
    "contains_any": (_AgentV.build_contains_any, {}),
    "icontains_any": (_AgentV.build_contains_any, {"fn": "icontains_any_of"}),
    "contains_all": (_AgentV.build_contains_all, {}),
    "icontains_all": (_AgentV.build_contains_all, {"lower": True}),
    "starts_with": (_AgentV.build_starts_with, {}),
    "ends_with": (_AgentV.build_starts_with, {"method": "endsWith"}),
    "equals": (_AgentV.build_equals, {}),
    "regex": (_AgentV.build_regex, {}),
    "is_json": (_AgentV.build_is_json, {}),
    "rubrics": (_AgentV.build_rubrics, {}),
    "rubric": (_AgentV.build_rubric, {}),
    "llm_judge": (_AgentV.build_llm_judge, {}),
    "agent_judge": (_AgentV.build_agent_judge, {}),
    "code_judge": (_AgentV.build_code_judge, {}),
    "composite": (_AgentV.build_composite, {}),
    "tool_trajectory": (_AgentV.build_tool_trajectory, {}),
    "field_accuracy": (_AgentV.build_field_accuracy, {}),
    "latency": (_AgentV.build_latency, {}),
    "cost": (_AgentV.build_cost, {}),
    "token_usage": (_AgentV.build_token_usage, {}),
    "execution_metrics": (_AgentV.build_execution_metrics, {}),
}
assert set(BUILDERS) == set(KNOWN_TYPES), "every known type has a builder"
