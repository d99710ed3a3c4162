# Over 500 lines: the whole AgentV suite format (suite, tests, messages, expected output, v2 to v4 spellings); its assertions are in agentv_assertions.py.
"""AgentV suites (``EVAL.yaml``) -> a normalised Blueprint, with an import report per test.

Reads the eval spec v2 form of the seeds (``tests`` / ``criteria`` / ``rubrics`` /
``assert``), the legacy form (``evalcases``, ``expected_outcome``, ``input_messages``,
``expected_messages``, ``execution.evaluators``) and the v3/v4 renames
(``assertions``, ``llm-grader``, ``code-grader``, ``eval_set``, ``threshold``), with AgentV 4.42's per-test
``vars`` filled into the test's placeholders first (agentv_vars.py).
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
import re
from typing import Any, Mapping

from ..diagnostics import format_path
from ..ids import normalize_tags
from ..limits import DEFAULT_LIMITS, Limits
from ..model_ids import is_collection_name
from ..notes import External, choice_hint, did_you_mean
from ..parse import ParseResult
from ..schema import Blueprint, Message, Point, Prompt, Verdicts
from ..source import Loaded
from .agentv_assertions import AssertionBuilder
from .agentv_vars import TEST_FIELDS as VARS_TEST_FIELDS, TooLarge, VarsFiller
from .common import (
    ImportReader,
    ImportReport,
    TestReport,
    csv_rows,
    is_number,
    judged_point,
    normalize_relative,
    short,
)

SUITE_KEYS = frozenset({
    "name", "description", "version", "author", "license", "tags", "requires", "input", "input_messages", "tests",
    "eval_cases", "evalcases", "target", "execution", "assert", "assertions", "evaluators", "workspace", "dataset",
    "eval_set", "metadata", "threshold", "$schema",
    "tools", "toolUse",  # evalsite's: the tools a native loop offers, with their mocks (docs/importing.md)
})
TEST_KEYS = frozenset({
    "id", "criteria", "expected_outcome", "outcome", "input", "input_messages", "expected_output",
    "expected_messages", "rubrics", "assert", "assertions", "evaluators", "execution", "workspace", "metadata",
    "conversation_id", "note", "description", "skip_defaults", "threshold", "input_files", "vars",
})
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


class _AgentV(ImportReader):
    dialect = "agentv"
    native_tools = False  # the suite declares tools for a native loop (evalsite's `tools` and `toolUse`)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.assertions = AssertionBuilder(self)
        self.expected: dict | None = None  # the test being read: what the builders read of it
        self.criteria: str | None = None
        self.question = ""
        self.vars_budget = [self.limits.max_expanded_chars]  # what filling in `vars` may add, for the suite

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
        self.read_tools(suite, bp, report.suite)
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

    def read_tools(self, suite, bp: Blueprint, rep: TestReport):
        """evalsite's `tools` and `toolUse` on a suite, as a blueprint's header has them (each tool's JSON Schema,
        `mocks` and `default`): AgentV's agents call their own tools, so a suite that is to be run on a model
        declares them here, and `tool_trajectory` and `execution_metrics` then score the native loop's calls."""
        if "tools" not in suite and "toolUse" not in suite:
            return
        from ..header_reader import HeaderReader

        header = HeaderReader(self.notes, None, None, derived_id=None, collections=None, limits=self.limits)
        header.read_tools(suite, bp)
        header.check_tool_mocks(bp, suite)
        self.native_tools = bool(bp.tools) and isinstance(bp.tool_use, dict) and \
            bp.tool_use.get("mode") in ("native", "auto") and bp.tool_use.get("enabled") is not False
        if self.native_tools:
            rep.map(f"tools -> native tool definitions with mocks (toolUse.mode {bp.tool_use['mode']})")
        elif bp.tools:
            rep.map("tools (trace-only: the model writes TOOL_CALL lines)")

    def unknown_suite_keys(self, suite):
        for key in suite:
            if key == "defaults":  # v5's key (dialects.py); in AgentV 4 an unknown field, often a YAML anchor's home
                self.warn("AgentV 4 has no `defaults`: it ignores the key with a warning, and so does evalsite "
                          "(YAML anchors defined in it still work)", suite, key, (key,),
                          "move shared settings to `execution`, `input` or `assertions`", "ignored", at_key=True)
                self.extras["defaults"] = suite[key]
                self.suite_report.unsupported_("defaults", "not an AgentV 4 field; ignored, as AgentV 4 ignores it")
            elif key not in SUITE_KEYS:
                self.warn(f"unknown key `{key}` in an AgentV suite; it is kept aside, not used", suite, key, (key,),
                          self.key_hint(key, SUITE_KEYS), "unknown-key", at_key=True)
                self.extras.setdefault("unknown", {})[key] = suite[key]

    def key_hint(self, key, known):

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
                          self.key_hint(key, known), "unknown-key", at_key=True)
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
        errors_before = self.notes.error_count()
        rep.line = self.position_of(row)[0]
        self.unknown_test_keys(row, path)
        row, suite_input = self.fill_vars(row, path, rep, suite_input)
        prompt = self.new_prompt(row, key, path, rep, defaults)
        self.test_extras(row, prompt, rep)
        criteria = self.read_criteria(row, path, rep)
        execution, skip_defaults = self.test_execution(row, path, prompt, rep)
        if "threshold" in row:
            prompt.verdicts = self.read_threshold(row, path) or prompt.verdicts
        prompt.messages = self.test_messages(row, path, rep, suite_input, skip_defaults)
        expected = self.read_expected(row, path, rep)
        if expected is not None:
            prompt.ideal_response = expected["reference"]
        self.expected = expected
        self.criteria = criteria
        self.question = "\n\n".join(m.content or "" for m in prompt.messages if m.role == "user")
        prompt.points = self.test_points(row, path, execution, prompt, rep, default_asserts, skip_defaults,
                                         criteria, expected)
        if expected is not None and not prompt.points:
            rep.approx("expected_output", "with nothing else to score, similarity to the expected output scores the "
                                          "test (needs an embeddings model)")
        if self.notes.error_count() > errors_before:
            return None
        return prompt

    def unknown_test_keys(self, row, path):
        for k in row:
            if k not in TEST_KEYS:
                self.warn(f"unknown key `{k}` in a test; it is kept aside, not used", row, k, (*path, k),
                          self.key_hint(k, TEST_KEYS), "unknown-key", at_key=True)
                self.extras.setdefault("tests", {}).setdefault(str(row.get("id")), {})[k] = row[k]

    def new_prompt(self, row, key, path, rep: TestReport, defaults) -> Prompt:
        """The test's prompt, before its messages and points: its id (an error when it has none) and the suite's
        defaults."""
        test_id = row.get("id")
        if not (isinstance(test_id, str) and test_id.strip()) and not is_number(test_id):
            self.error("each test needs an `id` (unique text)", row, "id" if "id" in row else None, (*path, "id"),
                       "add `id: my-test`", "test-id")
            test_id = None
        else:
            test_id = str(test_id)
            rep.id = test_id
            rep.map("id")
        return Prompt.model_construct(
            id=test_id or f"test-{key}", id_was_generated=False, description=None, messages=[], ideal_response=None,
            system=None, system_set=False, citation=None, weight=None, render_as="markdown", temperature=None,
            no_cache=defaults.get("no_cache"), required_tools=None, prohibited_tools=None, max_calls=None, tags=None,
            points=[], should_not=None, origin=self.origin(row, None, path), verdicts=defaults["verdicts"], checks=[],
            trials=defaults["trials"], trial_aggregation=defaults["trial_aggregation"], trial_threshold=None,
        )

    def test_extras(self, row, prompt: Prompt, rep: TestReport):
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

    def test_execution(self, row, path, prompt: Prompt, rep: TestReport) -> tuple[dict | None, bool]:
        """The test's ``execution`` (None unless a mapping) and whether it skips the suite's defaults."""
        skip_defaults = bool(row.get("skip_defaults"))
        execution = row.get("execution")
        if execution is not None and not isinstance(execution, dict):
            self.error("`execution` must be a mapping", row, "execution", (*path, "execution"), code="type")
            execution = None
        if isinstance(execution, dict):
            skip_defaults = skip_defaults or bool(execution.get("skip_defaults"))
            self.read_test_execution(execution, (*path, "execution"), prompt, rep)
        return execution, skip_defaults

    def fill_vars(self, row, path, rep: TestReport, suite_input):
        """AgentV 4's ``vars``: the test (and the suite's input before it) with its ``{{ name }}`` placeholders
        filled in (agentv_vars.py says how); the row and the suite's input as they are without ``vars``."""
        if "vars" not in row or row["vars"] is None:
            return row, suite_input
        if not isinstance(row["vars"], dict):
            self.warn(f"`vars` must be a mapping of names to values, not {short(row['vars'])}; it is ignored, as "
                      "AgentV ignores it", row, "vars", (*path, "vars"), "e.g. `vars: {question: What is 2+2?}`",
                      "vars")
            return row, suite_input
        filler = VarsFiller(row["vars"], self.vars_budget)
        try:
            filled = filler.fields(row, VARS_TEST_FIELDS, self.current_locator())
            suite_input = self.suite_input_with_vars(filler, suite_input)
        except TooLarge:
            self.error(f"the values of `vars` filled in make more than {self.limits.max_expanded_chars:,} characters",
                       row, "vars", (*path, "vars"), "use shorter values, or fewer placeholders", "limit")
            return row, suite_input
        rep.map("vars -> filled into {{ }} placeholders" if filler.used else "vars (no placeholder names them)")
        return filled, suite_input

    def current_locator(self):
        return self.external.locator if self.external is not None else self.notes.locator

    def suite_input_with_vars(self, filler: VarsFiller, suite_input):
        """The suite's ``input`` with the test's ``vars`` filled in (read again only when that changes it; a
        problem in it is reported once, not once per test)."""
        if self.suite.get("input") is None or "input_messages" in self.suite:
            return suite_input
        saved, self.external = self.external, None  # the suite's input is in the suite itself
        try:
            holder = filler.fields(self.suite, ("input",), self.notes.locator)
            if holder["input"] == self.suite["input"]:
                return suite_input
            seen = len(self.diagnostics)
            messages = self.read_input(holder, "input", ("input",), TestReport("(suite)"))
            new = self.diagnostics[seen:]
            del self.diagnostics[seen:]
            self.diagnostics.extend(d for d in new if d not in self.diagnostics)
            return messages
        finally:
            self.external = saved

    def test_messages(self, row, path, rep: TestReport, suite_input, skip_defaults) -> list[Message]:
        """The test's input messages (`input_messages` wins over `input`), after the suite's unless it skips them."""
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
        return self.finish_conversation(messages or [], rep)

    def test_points(self, row, path, execution, prompt: Prompt, rep: TestReport, default_asserts, skip_defaults,
                    criteria, expected) -> list[Point]:
        """The test's points: its rubrics, its own assertions, then the suite's (unless it skips them); the
        criteria as one judged point when nothing else scores it."""
        items = self.test_entries(row, path, execution, rep, default_asserts, skip_defaults)
        points: list[Point] = []
        # AgentV 3.0 onward: plain strings among the assertions are one rubric evaluator, weighted by their count.
        plain = [entry for entry in items if entry[0] == "own" and isinstance(entry[1], str)]
        if plain:
            _, _, container, index, ipath = plain[0]
            rep.map("plain-text assertions -> one rubric evaluator")
            points.extend(self.assertions.rubrics_points(self.gathered([e[1:4] for e in plain]),
                                                         container, index, ipath,
                                              float(len(plain)), None, False, prompt, rep, source="assertions"))
            items = [entry for entry in items if not any(entry is other for other in plain)]
        # Plain strings among the suite's default assertions (AgentV 4 `default-graders`): one rubric evaluator of
        # their own, weighted by their count, where the first of them stands (the test's own come first).
        suite_plain = [entry for entry in items if entry[0] == "suite" and isinstance(entry[1], str)]
        if suite_plain:
            first = next(i for i, entry in enumerate(items) if entry is suite_plain[0])
            items = [entry for entry in items if not any(entry is other for other in suite_plain)]
            items.insert(first, ("suite-plain", suite_plain))
        for entry in items:
            points.extend(ENTRY_POINTS[entry[0]](self, entry, prompt, rep))
        if not items and not plain:
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
        return points

    def test_entries(self, row, path, execution, rep: TestReport, default_asserts, skip_defaults) -> list:
        """What scores the test, in AgentV's order: ``("rubrics-field", row, "rubrics", path)``, its own
        assertions ``("own", item, container, index, path)``, then the suite's ``("suite", item, container, index,
        path)``. Every entry starts with its kind, so an assertion written as the text `suite` is never taken for
        one of these labels."""
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
        items.extend(("own", *entry) for entry in own)
        if default_asserts and not skip_defaults:
            items.extend(("suite", *entry) for entry in default_asserts)
            rep.map("suite assertions")
        elif default_asserts:
            rep.map("skip_defaults")
        return items

    def gathered(self, entries: list[tuple[Any, Any, Any]]) -> list:
        """The values of ``(value, container, index)`` entries as one list that keeps each value's position (plain
        strings gathered from an assertion list into one rubric evaluator are still shown where they stand)."""
        out = [value for value, _, _ in entries]
        locator = self.external.locator if self.external is not None else self.notes.locator
        locator._alive.append(out)
        for i, (_, container, index) in enumerate(entries):
            where = locator.where(container, index)
            if where is not None:
                locator.values[(id(out), i)] = where
        return out

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
        if isinstance(value, str) or is_number(value):
            rep.map(f"{key} -> ideal")
            return {"reference": str(value), "structured": None, "messages": [{"role": "assistant",
                                                                                "content": str(value)}]}
        if isinstance(value, dict) and "role" not in value:
            rep.approx(f"{key} (structured)", "kept as the ideal (its JSON) and used by field_accuracy")
            return {"reference": json.dumps(value, ensure_ascii=False), "structured": value,
                    "messages": [{"role": "assistant", "content": value}]}
        messages = self.expected_messages(row, key, (*path, key), rep)
        reference, structured = self.reference_of(messages)
        rep.map(f"{key} -> ideal (last assistant message)")
        if any(m.get("tool_calls") for m in messages):
            rep.approx("expected tool_calls", "kept in the ideal for judges; not matched (use tool_trajectory)")
        return {"reference": reference, "structured": structured, "messages": messages}

    def expected_messages(self, row, key, epath, rep: TestReport) -> list[dict]:
        """The expected messages (content blocks read into text), each with a role; a bad one is an error."""
        value = row[key]
        if _content_blocks(value):
            # `expected_output: [{type: file, value: ./x.md}]`: one assistant message of content blocks (AgentV).
            value = {"role": "assistant", "content": value}
            holder = {key: value}
        else:
            holder = row
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
                    (holder, key, epath)
                item = {**item, "content": self.expected_blocks_text(item["content"], *blocks_at, rep)}
            if self.expected_tool_calls_ok(item, ipath):
                messages.append(item)
        return messages

    def expected_tool_calls_ok(self, item, ipath) -> bool:
        """Whether an expected message's ``tool_calls`` (if any) is a list; each call without a name is an error."""
        calls = item.get("tool_calls")
        if calls is None:
            return True
        if not isinstance(calls, list):
            self.error("`tool_calls` must be a list", item, "tool_calls", (*ipath, "tool_calls"), code="type")
            return False
        for cindex, call in enumerate(calls):
            name = call.get("tool") if isinstance(call, dict) else None
            if name is None and isinstance(call, dict) and isinstance(call.get("function"), dict):
                name = call["function"].get("name")
            if not isinstance(name, str) or not name:
                self.error("each expected tool call needs `tool` (its name)", calls, cindex,
                           (*ipath, "tool_calls", cindex), "write `- tool: search` with optional `input`",
                           "tool-call")
        return True

    @staticmethod
    def reference_of(messages: list[dict]) -> tuple[str, Any]:
        """The ideal (the last assistant message: its text, its content as JSON, else its tool calls as JSON) and
        its structured content, if any."""
        last = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
        if last is None:
            return "", None
        content = last.get("content")
        if isinstance(content, (dict, list)):
            return json.dumps(content, ensure_ascii=False), content
        if content is not None:
            return str(content), None
        if last.get("tool_calls"):
            return json.dumps(last["tool_calls"], ensure_ascii=False, default=str), None
        return "", None

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


# --- the points of each kind of entry test_entries gathers (`suite-plain`: the suite's plain-string assertions,
# gathered by test_points into one rubric evaluator) ------------------------------------------------------------


def _suite_plain_points(reader: _AgentV, entry, prompt: Prompt, rep: TestReport) -> list[Point]:
    _, _, container, index, ipath = entry[1][0]
    rep.map("suite plain-text assertions -> one rubric evaluator")
    saved, reader.external = reader.external, None  # located in the suite itself
    try:
        strings = reader.gathered([(e[1], e[2], e[3]) for e in entry[1]])
        return reader.assertions.rubrics_points(strings, container, index, ipath[:-1], float(len(strings)), None,
                                                False, prompt, rep, source="suite assertions")
    finally:
        reader.external = saved


def _rubrics_field_points(reader: _AgentV, entry, prompt: Prompt, rep: TestReport) -> list[Point]:
    _, holder, key, path = entry
    return reader.assertions.rubrics_points(holder[key], holder, key, path, 1.0, None, False, prompt, rep,
                                            source="rubrics")


def _suite_assertion_points(reader: _AgentV, entry, prompt: Prompt, rep: TestReport) -> list[Point]:
    _, item, container, index, path = entry
    saved, reader.external = reader.external, None  # suite assertions are located in the suite itself
    try:
        return reader.assertions.assertion(item, container, index, path, prompt, rep, 1.0, None)
    finally:
        reader.external = saved


def _own_assertion_points(reader: _AgentV, entry, prompt: Prompt, rep: TestReport) -> list[Point]:
    _, item, container, index, path = entry
    return reader.assertions.assertion(item, container, index, path, prompt, rep, 1.0, None)


ENTRY_POINTS = {
    "suite-plain": _suite_plain_points,
    "rubrics-field": _rubrics_field_points,
    "suite": _suite_assertion_points,
    "own": _own_assertion_points,
}
