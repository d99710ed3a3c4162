# Over 500 lines: the whole AI Eval format (suites, cases, expected checks); evaluators: aieval_evaluators.py.
"""AI Eval suites (``tests/*.yaml``) -> a normalised Blueprint, with an import report per case.

Written from reference section 3 only (AI Eval is AGPL; none of its code is used).
A suite's ``prompt:`` names a prompt file by its ``name:`` field; its ``template`` is
filled from each case's ``input`` at import, so each case becomes one prompt.
Every check gets AI Eval's own pass rule as a minimum, a trial passes when every
check passes, and the case passes when pass@k reaches the threshold (0.8 here:
AI Eval takes it from configs/config.yaml, which holds API keys and is never read).
docs/importing.md has the mapping table.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from ..jsregex import RegexError, compile_js
from ..limits import DEFAULT_LIMITS, Limits
from ..notes import choice_hint
from ..parse import ParseResult
from ..schema import TEXT_AND_TOOL_CALLS, Blueprint, Message, Point, Prompt, Verdicts
from ..source import Loaded
from .aieval_evaluators import EVALUATORS, SEES_TOOL_CALLS, SIMPLE_TYPES, Evaluator
from .common import ImportReader, ImportReport, TestReport, function_point, is_number, new_check, short

SUITE_KEYS = frozenset({"suite", "prompt", "description", "is_system_prompt", "cases"})
CASE_KEYS = frozenset({"id", "description", "input", "expected", "evaluators", "trials", "tool_mocks", "max_steps"})
EXPECTED_KEYS = ("exact_match", "contains", "not_contains", "regex", "json_schema", "tool_calls")
EVALUATOR_TYPES = ("exact", "contains", "regex", "json_schema", "llm_judge", "similarity", "factuality", "tool_call",
                   "faithfulness", "relevancy", "precision", "task_completion", "tool_selection", "efficiency",
                   "hallucination", "toxicity", "bias")
EVALUATOR_FIELDS = frozenset({"type", "criteria", "rubric", "score_scale", "reference", "ground_truth",
                              "score_threshold", "context", "question", "task", "criteria_list", "expected_tools",
                              "max_steps", "max_tokens", "categories"})
DEFAULT_CASE_THRESHOLD = 0.8
GENERIC_USER_TASK = "Please process the request described in the system prompt."


def import_aieval(loaded: Loaded, *, files: Mapping[str, str] | None, blueprint_id: str | None, collections,
                  call_hosts, limits: Limits = DEFAULT_LIMITS) -> ParseResult:
    reader = _AiEval(loaded, derived_id=blueprint_id, collections=collections, call_hosts=call_hosts, files=files,
                     limits=limits)
    blueprint, report = reader.read_suite()
    return reader.result(blueprint, report, loaded.fmt)


def go_value(value: Any) -> str:
    """A value as Go's ``%v`` prints it (what AI Eval puts into a template)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    if isinstance(value, list):
        return "[" + " ".join(go_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_value(v)}" for k, v in sorted(value.items())) + "]"
    return str(value)


def go_regex_to_js(pattern: str) -> str:
    """RE2 spellings JavaScript lacks: ``\\z``, ``\\A``, ``(?P<name>``."""
    return pattern.replace("(?P<", "(?<").replace("\\A", "^").replace("\\z", "$")


AIEVAL_DEFAULT_STEPS = 5  # a case's `max_steps` of 0 or none (reference 3.3)
MAX_LOOP_STEPS = 50  # runs/engine/tools.MAX_STEPS (blueprints/spec may not import runs)


class _AiEval(ImportReader):
    dialect = "aieval"
    prompt_tools: list[dict] = []  # the prompt file's tools, as blueprint tools
    case_max_steps = 0  # the case being read: its `max_steps` (0: none), efficiency's default step budget

    def read_suite(self) -> tuple[Blueprint, ImportReport]:
        report = ImportReport("aieval", "AI Eval suite")
        bp = Blueprint(derived_id=self.derived_id)
        suite = self.loaded.documents[0]
        for key in suite:
            if key not in SUITE_KEYS:
                self.warn(f"unknown key `{key}` in an AI Eval suite; AI Eval ignores it, and so does evalsite", suite,
                          key, (key,), code="unknown-key", at_key=True)
                self.extras.setdefault("unknown", {})[key] = suite[key]
        if isinstance(suite.get("suite"), str) and suite["suite"].strip():
            bp.title = suite["suite"]
            report.suite.map("suite -> title")
        else:
            self.error("`suite` (the suite's name) is required", suite, "suite" if "suite" in suite else None,
                       ("suite",), code="suite")
        if "description" in suite:
            bp.description = self.expect_text(suite, "description", ("description",))
            report.suite.map("description")
        if "is_system_prompt" in suite:
            self.warn("`is_system_prompt` on a suite is ignored (AI Eval reads it from the prompt file)", suite,
                      "is_system_prompt", ("is_system_prompt",), "set `is_system_prompt` in the prompt file",
                      code="ignored", at_key=True)
        prompt_file = self.find_prompt_file(suite, report.suite)
        if prompt_file is not None and prompt_file.get("tools"):
            self.read_tools(prompt_file, bp, report.suite)
        report.suite.approx("judges", "AI Eval's judge is the model under test; here the run's judges judge")
        report.suite.approx("case pass rule", f"a case passes when pass@k reaches {DEFAULT_CASE_THRESHOLD} (AI Eval "
                                              "reads its threshold from configs/config.yaml, which is not imported)")
        cases = suite.get("cases")
        if not isinstance(cases, list) or not cases:
            self.error("`cases` must be a non-empty list", suite, "cases" if "cases" in suite else None, ("cases",),
                       "add `cases:` with `- id: ...` and `input: {...}`", "cases")
            return bp, report
        seen: dict[str, int] = {}
        for index, case in enumerate(cases):
            rep = TestReport(str(case.get("id")) if isinstance(case, dict) else f"cases[{index}]")
            report.tests.append(rep)
            prompt = self.read_case(case, cases, index, ("cases", index), prompt_file, rep)
            if prompt is None:
                continue
            if prompt.id in seen:
                self.error(f"duplicate case id '{prompt.id}'", case, "id", ("cases", index, "id"),
                           "give each case a unique `id`", "duplicate-id")
            seen[prompt.id] = index
            bp.prompts.append(prompt)
        return bp, report

    # --- the prompt file ---------------------------------------------------------------------------

    def find_prompt_file(self, suite, rep: TestReport) -> dict | None:
        name = suite.get("prompt")
        if not isinstance(name, str) or not name.strip():
            self.error("`prompt` (the name of a prompt file) is required", suite, "prompt" if "prompt" in suite else
                       None, ("prompt",), "write `prompt: <the name: of a file in prompts/>`", "prompt")
            return None
        found = []
        for file_name, text in self.files.items():
            if not file_name.lower().endswith((".yaml", ".yml")):
                continue
            from ..source import SourceError, load

            try:
                docs = load(text, "yaml", self.limits).documents
            except SourceError:
                continue
            doc = docs[0] if len(docs) == 1 else None
            if isinstance(doc, dict) and doc.get("name") == name and "template" in doc:
                found.append((file_name, doc))
        if not found:
            self.error(f"no prompt file named '{name}' came with the suite (AI Eval finds it by its `name:` field, "
                       "not its file name)", suite, "prompt", ("prompt",),
                       "import the project folder (with prompts/ beside tests/), so the prompt files come along",
                       "missing-file")
            return None
        if len(found) > 1:
            self.error(f"two prompt files are named '{name}': {', '.join(f for f, _ in found)}", suite, "prompt",
                       ("prompt",), "AI Eval refuses duplicate prompt names; rename one", "prompt")
            return None
        file_name, doc = found[0]
        self.companion(file_name)
        if not isinstance(doc.get("template"), str) or not doc["template"].strip():
            self.error(f"the prompt file {file_name} has no `template` text", suite, "prompt", ("prompt",),
                       code="prompt")
            return None
        rep.map(f"prompt -> {file_name} (rendered per case)")
        rep.approx("prompt template", "filled in at import: each case becomes one prompt; the template and its "
                                      "variables are not kept editable")
        if "version" in doc:
            self.extras["prompt_version"] = doc["version"]
        self.prompt_file_name = file_name
        return doc

    def read_tools(self, prompt_file, bp: Blueprint, rep: TestReport):
        tools = []
        for tool in prompt_file["tools"] if isinstance(prompt_file["tools"], list) else []:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                entry = {"name": tool["name"]}
                if isinstance(tool.get("description"), str):
                    entry["description"] = tool["description"]
                entry["schema"] = tool.get("input_schema") or {"type": "object"}
                tools.append(entry)
        if tools:
            bp.tools = tools
            # As AI Eval: the tools are offered natively; a case without `tool_mocks` is one completion whose calls
            # are recorded, never answered (a case with mocks gets its own loop, case_tools). `auto`: a model
            # without native tools (a custom endpoint) writes TOOL_CALL lines instead, and the response says so.
            bp.tool_use = {"enabled": True, "mode": "auto", "recordOnly": True, "maxSteps": 1}
            self.prompt_tools = tools
            rep.map("prompt tools -> native tool definitions (a case without tool_mocks: one completion, its calls "
                    "recorded, not answered)")

    def render(self, template: str, variables: dict, case, path) -> str | None:
        text = template
        for key, value in variables.items():
            text = text.replace("{{" + str(key) + "}}", go_value(value))
        if re.search(r"\{\{-?\s*(range|if|with|block|define|template)\b", text):
            self.error("the prompt template uses Go template actions ({{range}}, {{if}}...), which evalsite does not "
                       "run", case, "input", (*path, "input"), "write the text out, or use plain `{{.name}}` "
                                                               "variables", "template")
            return None
        missing = []

        def fill(match):
            key = match.group(1)
            if key in variables:
                return go_value(variables[key])
            missing.append(key)
            return match.group(0)

        text = re.sub(r"\{\{-?\s*\.([A-Za-z_][A-Za-z0-9_]*)\s*-?\}\}", fill, text)
        if missing:
            self.error(f"the template needs `{missing[0]}`, which this case's `input` does not give", case, "input",
                       (*path, "input"), f"add `{missing[0]}:` under `input:`", "template")
            return None
        if text.count("{{") != text.count("}}"):
            self.error("the template's `{{` and `}}` do not pair up (AI Eval refuses such a template)", case, "input",
                       (*path, "input"), "write a lone brace pair with a space between, e.g. `} }`", "template")
            return None
        return text

    # --- cases -------------------------------------------------------------------------------------

    def read_case(self, case, holder, index, path, prompt_file, rep: TestReport) -> Prompt | None:
        if not isinstance(case, dict):
            self.error("a case must be a mapping with `id` and `input`", holder, index, path, code="case")
            return None
        errors_before = self.notes.error_count()
        rep.line = self.position_of(case)[0]
        for key in case:
            if key not in CASE_KEYS:
                self.warn(f"unknown key `{key}` in a case; AI Eval ignores it, and so does evalsite", case, key,
                          (*path, key), code="unknown-key", at_key=True)
        case_id = case.get("id")
        if not (isinstance(case_id, str) and case_id.strip()) and not is_number(case_id):
            self.error("each case needs an `id`", case, "id" if "id" in case else None, (*path, "id"), code="case")
            case_id = f"case-{index}"
        case_id = str(case_id)
        rep.id = case_id
        messages, system = self.case_messages(case, path, prompt_file, rep)
        prompt = Prompt.model_construct(
            id=case_id, id_was_generated=False, description=case.get("description") if isinstance(
                case.get("description"), str) else None, messages=messages, ideal_response=None, system=system,
            system_set=system is not None, citation=None, weight=None, render_as="markdown", temperature=None,
            no_cache=None, required_tools=None, prohibited_tools=None, max_calls=None, tags=None, points=[],
            should_not=None, origin=self.origin(case, None, path), verdicts=Verdicts(pass_at=0.0, borderline_at=None),
            checks=[], trials=None, trial_aggregation="pass_at_k", trial_threshold=DEFAULT_CASE_THRESHOLD,
        )
        self.case_trials(case, path, prompt, rep)
        steps = case.get("max_steps")
        self.case_max_steps = steps if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0 else 0
        self.check_case_limits(case, path)
        self.case_tools(case, path, prompt, rep)
        prompt.points = self.case_points(case, path, prompt, rep, errors_before)
        if self.notes.error_count() > errors_before:
            return None
        return prompt

    def case_messages(self, case, path, prompt_file, rep: TestReport) -> tuple[list[Message], str | None]:
        """The case's messages and system prompt: the prompt file's template filled with the case's ``input``."""
        inputs = case.get("input")
        if not isinstance(inputs, dict):
            self.error("`input` is required: a mapping of the template's variables", case,
                       "input" if "input" in case else None, (*path, "input"), "e.g. `input: {user_request: ...}`",
                       "case")
            return [], None
        if prompt_file is None:
            return [], None
        variables = self.case_variables(case, path, prompt_file, inputs)
        rendered = self.render(prompt_file["template"], variables, case, path)
        if rendered is None:
            return [], None
        if not prompt_file.get("is_system_prompt"):
            rep.map("input -> rendered prompt")
            return [Message(role="user", content=rendered)], None
        task = inputs.get("user_task")
        user = go_value(task) if task is not None else GENERIC_USER_TASK
        if task is None:
            rep.approx("is_system_prompt", f"the user turn is a generic request: \"{GENERIC_USER_TASK}\"")
        rep.map("is_system_prompt -> system + user_task")
        rep.map("input -> rendered prompt")
        return [Message(role="user", content=user)], rendered

    def case_variables(self, case, path, prompt_file, inputs: dict) -> dict:
        """The prompt's variables' defaults, then the case's ``input``; a required one missing is an error."""
        declared = [v for v in prompt_file.get("variables") or [] if isinstance(v, dict)
                    and isinstance(v.get("name"), str)]
        variables = {v["name"]: v["default"] for v in declared if "default" in v}
        variables.update(inputs)
        for var in declared:
            if var.get("required") and var["name"] not in variables:
                self.error(f"the prompt needs the variable `{var['name']}`, which this case does not give", case,
                           "input", (*path, "input"), f"add `{var['name']}:` under `input:`", "template")
        return variables

    def case_trials(self, case, path, prompt: Prompt, rep: TestReport) -> None:
        trials = case.get("trials")
        if trials is None:
            return
        if isinstance(trials, int) and not isinstance(trials, bool) and 0 <= trials <= 100:
            prompt.trials = trials or None
            if trials:
                rep.map(f"trials: {trials}")
        else:
            self.error("`trials` must be a whole number from 0 to 100", case, "trials", (*path, "trials"),
                       code="trials")

    def case_tools(self, case, path, prompt: Prompt, rep: TestReport) -> None:
        """A case's `tool_mocks` and `max_steps` -> the prompt's own tools and native loop (AI Eval, reference 3.4):
        each call is answered by the first mock of that name whose `match` is a subset of the arguments (a
        `response`, or an `error` the model sees as a tool error); a call no mock answers fails the loop, recorded
        with its reason; `max_steps` (0 or absent: 5) bounds the model calls."""
        mocks = case.get("tool_mocks")
        if not mocks or not isinstance(mocks, list):
            if "max_steps" in case and case.get("max_steps"):
                rep.approx("max_steps", "without tool_mocks AI Eval makes one completion, so it bounds nothing")
            return
        steps = case.get("max_steps") or AIEVAL_DEFAULT_STEPS
        if not isinstance(steps, int) or isinstance(steps, bool):
            return  # refused by check_case_limits
        if not self.prompt_tools:
            rep.approx("tool_mocks", "the prompt file declares no `tools`, so the model is offered none and the "
                                     "mocks answer nothing")
            return
        declared = {t["name"] for t in self.prompt_tools}
        rules: dict[str, list[dict]] = {}
        for index, mock in enumerate(mocks):
            if not isinstance(mock, dict) or not isinstance(mock.get("name"), str):
                continue  # refused by check_case_limits
            mpath = (*path, "tool_mocks", index)
            unknown = [k for k in mock if k not in ("name", "response", "error", "match")]
            for key in unknown:
                self.warn(f"unknown key `{key}` in a tool mock; AI Eval ignores it, and so does evalsite", mock, key,
                          (*mpath, key), code="unknown-key", at_key=True)
            if mock["name"] not in declared:
                self.warn(f"tool mock `{mock['name']}` answers a tool the prompt file does not declare, so the model "
                          "is never offered it", mock, "name", (*mpath, "name"),
                          "declare the tool under the prompt file's `tools:`", "tool-call")
                continue
            match = mock.get("match")
            if match is not None and not isinstance(match, dict):
                self.error("a tool mock's `match` must map argument names to values", mock, "match",
                           (*mpath, "match"), "e.g. `match: {city: Paris}`", "tool-call")
                continue
            rule: dict = {"when": match or {}, "subset": True}
            if mock.get("error") not in (None, ""):
                rule["error"] = go_value(mock["error"])
            else:
                rule["result"] = mock.get("response")
            rules.setdefault(mock["name"], []).append(rule)
        prompt.tools = [dict(tool, mocks=rules.get(tool["name"], [])) for tool in self.prompt_tools]
        prompt.tool_use = {"enabled": True, "mode": "auto", "maxSteps": min(steps, MAX_LOOP_STEPS)}
        rep.map("tool_mocks -> this case's tools with mocks, answered in a native tool loop")
        rep.map(f"max_steps -> toolUse.maxSteps {min(steps, MAX_LOOP_STEPS)}")
        if steps > MAX_LOOP_STEPS:
            self.warn(f"`max_steps: {steps}` is more than the {MAX_LOOP_STEPS} model calls evalsite's tool loop "
                      f"allows; it runs at most {MAX_LOOP_STEPS}", case, "max_steps", (*path, "max_steps"),
                      code="tool-call")
        unmocked = [t["name"] for t in self.prompt_tools if t["name"] not in rules]
        if unmocked:
            rep.approx("tools without a mock", f"{', '.join(unmocked)}: a call to one fails the case's loop, recorded "
                                               "with its reason (AI Eval fails the trial)")

    def case_points(self, case, path, prompt: Prompt, rep: TestReport, errors_before: int) -> list[Point]:
        """Evaluators first, then the expected block (with its tool calls): AI Eval's order. A case with neither
        is an error."""
        evaluators = case.get("evaluators") or []
        if not isinstance(evaluators, list):
            self.error("`evaluators` must be a list", case, "evaluators", (*path, "evaluators"), code="type")
            evaluators = []
        expected = case.get("expected") or {}
        if not isinstance(expected, dict):
            self.error("`expected` must be a mapping", case, "expected", (*path, "expected"), code="type")
            expected = {}
        thresholds = self.simple_thresholds(evaluators, path)
        points: list[Point] = []
        for eindex, evaluator in enumerate(evaluators):
            points.extend(self.evaluator(evaluator, evaluators, eindex, (*path, "evaluators", eindex), prompt, rep))
        points.extend(self.expected_block(expected, case, (*path, "expected"), prompt, rep, thresholds))
        if not points and not any(d.is_error for d in self.diagnostics[errors_before:]):
            if not expected and not evaluators:
                self.error("a case needs at least one `expected` assertion or one evaluator", case, "id", path,
                           "add `expected: {contains: [...]}` or an evaluator", "case")
        return points

    def check_case_limits(self, case, path) -> None:
        """What AI Eval's Validate refuses in a case beyond its id and input: negative `max_steps`, a tool mock
        without a name."""
        steps = case.get("max_steps")
        if steps is not None and not (isinstance(steps, int) and not isinstance(steps, bool) and steps >= 0):
            self.error("`max_steps` must be a whole number, 0 or more (0 means AI Eval's default, 5)", case,
                       "max_steps", (*path, "max_steps"), "e.g. `max_steps: 5`, or leave it out", "case")
        mocks = case.get("tool_mocks")
        if mocks is None:
            return
        if not isinstance(mocks, list):
            self.error("`tool_mocks` must be a list of `{name, response}`", case, "tool_mocks", (*path, "tool_mocks"),
                       code="type")
            return
        for index, mock in enumerate(mocks):
            name = mock.get("name") if isinstance(mock, dict) else None
            if not isinstance(name, str) or not name.strip():
                self.error("each tool mock needs a `name` (the tool it answers)", mocks, index,
                           (*path, "tool_mocks", index), "write `- name: search` with `response:`", "tool-call")

    def simple_thresholds(self, evaluators, path) -> dict[str, float]:
        """``score_threshold`` of the simple types, which set the pass rule of the matching `expected` check."""
        out = {}
        for evaluator in evaluators:
            if isinstance(evaluator, dict) and evaluator.get("type") in SIMPLE_TYPES:
                value = evaluator.get("score_threshold")
                if is_number(value) and value > 0:
                    out[evaluator["type"]] = float(value)
        return out

    def expected_block(self, expected, case, path, prompt: Prompt, rep: TestReport, thresholds) -> list[Point]:
        """One check per assertion of ``expected`` (its minimum 1, or the matching evaluator's threshold), in AI
        Eval's order, then the tool calls."""
        for key in expected:
            if key not in EXPECTED_KEYS:
                self.warn(f"unknown key `{key}` in `expected`; AI Eval ignores it, and so does evalsite", expected, key,
                          (*path, key), "known: " + ", ".join(EXPECTED_KEYS), "unknown-key", at_key=True)
        points = []
        readers = (("exact_match", self.expected_exact), ("contains", self.expected_contains),
                   ("not_contains", self.expected_contains), ("regex", self.expected_regex),
                   ("json_schema", self.expected_json_schema))
        for key, read in readers:
            found = read(expected, key, (*path, key), rep) if key in expected else None
            if found is not None:
                kind, fn, args, label = found
                check_id = new_check(prompt.checks, label=label, kind=kind, min_score=thresholds.get(kind, 1.0),
                                     preferred_id=kind)
                sees = TEXT_AND_TOOL_CALLS if kind in SEES_TOOL_CALLS else "text"
                points.append(function_point(fn, args, weight=1.0, origin=self.origin(expected, key, (*path, key)),
                                             check_id=check_id, label=label, sees=sees))
                rep.map(f"expected.{key} -> ${fn}" + (" (on the text and the tool calls)" if sees != "text" else ""))
        if "tool_calls" in expected:
            points.extend(self.tool_calls(expected, (*path, "tool_calls"), prompt, rep, thresholds.get("tool_call")))
        return points

    # Each reader of an `expected` assertion returns (kind, fn, args, label) for its check, or None after an error.

    def expected_exact(self, expected, key, path, rep: TestReport):
        value = expected[key]
        if not isinstance(value, str):
            self.error("`exact_match` must be text", expected, key, path, code="type")
            return None
        return "exact", "equals", {"value": value, "trim": False}, f"exact_match: {short(value, 40)}"

    def expected_contains(self, expected, key, path, rep: TestReport):
        """``contains`` / ``not_contains``: a list of text, none of it blank (blank text matches every response)."""
        value = expected[key]
        if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
            self.error(f"`{key}` must be a list of text", expected, key, path, code="type")
            return None
        blank = [i for i, v in enumerate(value) if not v.strip()]
        for i in blank:
            self.error(f"`{key}[{i}]` is empty: it would match every response (AI Eval refuses it)", value, i,
                       (*path, i), "write the text to look for, or remove the item", "empty")
        if blank:
            return None
        return key, f"{key}_all_of", value, f"{key}: {short(value, 40)}"

    def expected_regex(self, expected, key, path, rep: TestReport):
        value = expected[key]
        if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
            self.error("`regex` must be a list of patterns", expected, key, path, code="type")
            return None
        patterns = [go_regex_to_js(v) for v in value]
        ok = True
        for i, pattern in enumerate(patterns):
            try:
                compile_js(pattern)
            except RegexError as exc:
                self.error(f"the regex does not compile: {exc.message}", value, i, (*path, i), code="regex")
                ok = False
        if not ok:
            return None
        if patterns != value:
            rep.approx("regex", "Go regex spellings (\\z, \\A, (?P<name>) translated to JavaScript")
        return "regex", "matches_all_of", patterns, f"regex: {short(value, 40)}"

    def expected_json_schema(self, expected, key, path, rep: TestReport):
        from .. import functions

        value = expected[key]
        problem = functions.check_args("json_matches_schema", value)
        if problem:
            self.error(problem, expected, key, path, code="json-schema")
            return None
        rep.approx("json_schema", "validated with full JSON Schema (AI Eval checks a subset: type, required, "
                                  "properties, items)")
        return "json_schema", "json_matches_schema", value, "json_schema"

    def tool_calls(self, expected, path, prompt: Prompt, rep: TestReport, threshold) -> list[Point]:
        value = expected["tool_calls"]
        if not isinstance(value, list) or not value:
            self.error("`tool_calls` must be a list of `{name, args_match, order, required}`", expected, "tool_calls",
                       path, code="type")
            return []
        clean, orders = [], set()
        for i, item in enumerate(value):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
                self.error("each expected tool call needs `name`", value, i, (*path, i),
                           "write `- name: get_weather` (the tool's name), with optional `args_match`", "tool-call")
                return []
            entry = {"name": item["name"]}
            if item.get("args_match") is not None:
                if not isinstance(item["args_match"], dict):
                    self.error("`args_match` must be a mapping", item, "args_match", (*path, i, "args_match"),
                               code="tool-call")
                    return []
                entry["args_match"] = item["args_match"]
            order = item.get("order", 0) or 0
            if not isinstance(order, int) or isinstance(order, bool) or order < 0:
                self.error("`order` must be a whole number (1 for the first call; 0 for any)", item, "order",
                           (*path, i, "order"), code="tool-call")
                return []
            if order and order in orders:
                self.error(f"two expected calls have `order: {order}`", item, "order", (*path, i, "order"),
                           code="tool-call")
                return []
            orders.add(order)
            if order:
                entry["order"] = order
            entry["required"] = bool(item.get("required", False))
            clean.append(entry)
        origin = self.origin(expected, "tool_calls", path)
        check_id = new_check(prompt.checks, label="tool_calls", kind="tool_calls",
                             min_score=threshold, preferred_id="tool_calls")
        points = [function_point("tool_calls_match", {"expected": clean}, weight=1.0, origin=origin,
                                 check_id=check_id, label="tool_calls")]
        if threshold is None and any(e["required"] for e in clean):
            points.append(function_point("tool_calls_match", {"expected": clean, "only_required": True}, weight=0.0,
                                         origin=origin, label="required tool calls", min_score=1.0))
        rep.map("expected.tool_calls -> $tool_calls_match")
        rep.approx("tool calls", "read from the TOOL_CALL lines the model writes (trace-only), not native tool "
                                 "calling")
        return points

    # --- evaluators --------------------------------------------------------------------------------

    def evaluator(self, item, holder, index, path, prompt: Prompt, rep: TestReport) -> list[Point]:
        """The points of one evaluator: the rules every type shares checked here, then its function in
        EVALUATORS (aieval_evaluators.py)."""
        if not self.evaluator_is_valid(item, holder, index, path):
            return []
        for key in item:
            if key == "expected":
                self.warn("`expected:` inside an evaluator is ignored by AI Eval (so this check passes there without "
                          "checking anything); it is ignored here too", item, key, (*path, key),
                          "move it to the case's `expected:` block", "ignored", at_key=True)
            elif key not in EVALUATOR_FIELDS:
                self.warn(f"unknown key `{key}` in an evaluator; it is ignored", item, key, (*path, key),
                          code="unknown-key", at_key=True)
        kind = item["type"]
        origin = None if kind in SIMPLE_TYPES else self.origin(holder, index, path)
        ev = Evaluator(kind, item, path, origin, item.get("score_threshold"), prompt, rep)
        return EVALUATORS[kind](self, ev)

    def evaluator_is_valid(self, item, holder, index, path) -> bool:
        """What AI Eval's validation refuses in any evaluator: no mapping, no or an unknown `type`, a
        `score_threshold` outside 0 to 1, a negative `score_scale`, a blank `bias` category."""
        if not isinstance(item, dict):
            self.error("an evaluator must be a mapping with `type`", holder, index, path, code="evaluator")
            return False
        kind = item.get("type")
        if kind is None or (isinstance(kind, str) and not kind.strip()):
            self.error("an evaluator needs `type`", holder, index, path, "known: " + ", ".join(EVALUATOR_TYPES),
                       "evaluator")
            return False
        if kind not in EVALUATOR_TYPES:
            self.error(f"unknown evaluator type {kind!r}", item, "type" if "type" in item else None, (*path, "type"),
                       choice_hint(kind, EVALUATOR_TYPES), "evaluator")
            return False
        threshold = item.get("score_threshold")
        if threshold is not None and not (is_number(threshold) and 0 <= threshold <= 1):
            self.error("`score_threshold` must be a number from 0 to 1 (AI Eval refuses one below 0; above 1 no "
                       "response could pass)", item, "score_threshold", (*path, "score_threshold"),
                       "e.g. `score_threshold: 0.7`, or leave it out for the evaluator's own pass rule", "threshold")
            return False
        if kind == "llm_judge" and "score_scale" in item and not (
                isinstance(item["score_scale"], int) and not isinstance(item["score_scale"], bool)
                and item["score_scale"] >= 0):
            self.error("`score_scale` must be a whole number, 0 or more (0 means AI Eval's default, 5)", item,
                       "score_scale", (*path, "score_scale"), "e.g. `score_scale: 10`, or leave it out", "evaluator")
            return False
        if kind == "bias" and isinstance(item.get("categories"), list):
            blank = [i for i, c in enumerate(item["categories"]) if not isinstance(c, str) or not c.strip()]
            for i in blank:
                self.error(f"`categories[{i}]` is empty (AI Eval refuses it)", item["categories"], i,
                           (*path, "categories", i), "name the bias category, e.g. gender, or remove the item",
                           "evaluator")
            if blank:
                return False
        return True
