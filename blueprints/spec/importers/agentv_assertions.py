# Over 500 lines: one small function per AgentV assertion type (the BUILDERS table at the end).
"""AgentV assertions -> points: one small function per assertion type, found in ``BUILDERS`` by type.

``AssertionBuilder`` works for the suite reader in agentv.py (``_AgentV``): it reads what every type shares
(weight, ``required``, ``negate``, ``min_score``), finds the type's function in ``BUILDERS`` and hands it the
``Assertion``. Each function takes the builder (its ``notes`` report problems at their place; its ``reader``
has the test being built: criteria, expected output, question) and returns the points, like
aieval_evaluators.EVALUATORS. Rubric items are read in agentv_rubrics.py. docs/importing.md has the mapping table.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from ..notes import choice_hint
from ..schema import Origin, Point, Prompt
from .common import (
    TestReport,
    function_point,
    is_number,
    judged_point,
    new_check,
    normalize_relative,
    short,
)
from .agentv_rubrics import PASS_MARK, judged_points, rubric_items


COMMON_ITEM_KEYS = frozenset({"name", "type", "weight", "required", "negate", "min_score"})
TRAJECTORY_MODES_SEED = ("any_order", "in_order", "exact")
TRAJECTORY_MODES_ALL = ("any_order", "in_order", "exact", "superset", "subset")
ARGS_MATCH_MODES = ("exact", "superset", "subset", "ignore")
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
# A code grader's own keys; AgentV passes any other key on to the script as `config`.
CODE_JUDGE_KEYS = frozenset({"script", "command", "cwd", "target", "config", "timeout_s", "preprocessors"})
TEMPLATE_VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
NOT_AN_AGENT = "evalsite runs language models, not agent targets, and has no workspace for an agent to work in"


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


def kind_of(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    key = value.strip().lower().replace("-", "_")
    return TYPE_ALIASES.get(key, key)


class AssertionBuilder:
    """Builds an assertion's points; ``reader`` is the suite reader (its notes, files and current test)."""

    def __init__(self, reader):
        self.reader = reader
        self.notes = reader.notes
        self.error, self.warn, self.origin = reader.error, reader.warn, reader.origin

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
        kind = kind_of(item.get("type"))
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
                      self.reader.key_hint(kind, KNOWN_TYPES), "unsupported")
            rep.unsupported_(f"assertion type {item.get('type')}", "custom assertion types are code evalsite does not "
                                                                   "have")
            self.drop_check(prompt, check_id, parent_check)
            return []
        points = builder(self, Assertion(item, path, origin, total, check_id, negate, prompt, rep, label))
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
                          self.reader.key_hint(k, allowed), "unknown-key", at_key=True)

    def value_of(self, item, path, want_list=False):
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
                   (*path, "value"), "e.g. `value: \"DENIED\"`", "value")
        return None

    def assertion_value(self, a: Assertion, want_list=False):
        """The ``value`` of an assertion that has only that (text, or a list of text); None after an error."""
        self.unknown_item_keys(a.item, a.path, ("value",))
        return self.value_of(a.item, a.path, want_list=want_list)

    def fn_points(self, a: Assertion, fn, args, *, inverted: bool | None = None):
        """One function point for the assertion (inverted as the assertion says, unless told)."""
        return [function_point(fn, args, weight=a.weight, origin=a.origin, check_id=a.check_id,
                               inverted=a.negate if inverted is None else inverted, label=a.label)]

    def js_points(self, a: Assertion, expression):
        return self.fn_points(a, "js", f"!({expression})" if a.negate else expression, inverted=False)

    def rubrics_points(self, value, holder, key, path, weight, check_id, negate, prompt, rep, source):
        """Judged points of a rubric list (agentv_rubrics.py), their weights normalised inside ``weight``."""
        if not isinstance(value, list) or not value:
            self.notes.error(f"`{key}` must be a non-empty list of rubric items (text, or `{{id, outcome, weight}}`)",
                             holder, key, path, code="rubrics")
            return []
        if check_id is None:
            check_id = new_check(prompt.checks, label="rubrics", kind="rubrics", preferred_id="rubrics")
        items = rubric_items(self.notes, value, path, rep)
        points = judged_points(items, self.origin, weight=weight, check_id=check_id, negate=negate)
        if points:
            rep.map(f"{source} -> judged points")
        return points

    def render_judge_prompt(self, text: str) -> str:
        expected = self.reader.expected or {}
        values = {
            "criteria": self.reader.criteria or "",
            "question": self.reader.question,
            "input": self.reader.question,
            "reference_answer": expected.get("reference") or "",
            "expected_output": expected.get("reference") or "",
            "answer": "[the response]",
            "candidate_answer": "[the response]",
            "output": "[the response]",
            "file_changes": "",
        }
        return TEMPLATE_VARIABLE.sub(lambda m: values.get(m.group(1), m.group(0)), text).strip()

    def code_judge_config(self, item, path, rep: TestReport, label) -> Any:
        """What the script is given as ``config``: AgentV passes every key it does not know on to the script (the
        `fields` of a field-matching grader...), merged under a `config` mapping's keys, which win."""
        if "preprocessors" in item:
            rep.unsupported_(f"code_judge {label}: preprocessors", "the output is given to the script as it is")
        passed = {k: v for k, v in item.items() if k not in COMMON_ITEM_KEYS | CODE_JUDGE_KEYS and v is not None}
        if not passed:
            return item.get("config")
        if "config" in item and not isinstance(item["config"], dict):
            self.error("`config` must be a mapping when the grader has other settings to pass on too", item,
                       "config", (*path, "config"), code="code-judge")
            return item["config"]
        rep.map(f"code_judge {label}: " + ", ".join(f"`{k}`" for k in passed) + " -> the script's config")
        return {**passed, **(item.get("config") or {})}

    def limit_of(self, item, path, keys, what, positive=True):
        for key in keys:
            if key in item:
                value = item[key]
                if is_number(value) and (value > 0 if positive else value >= 0):
                    return value
                self.error(f"`{key}` must be {what}", item, key, (*path, key), code="metric")
                return None
        self.error(f"this assertion needs `{keys[0]}:` ({what})", item, None, path, code="metric")
        return None


# --- the builders: one small function per assertion type, each reporting through the builder's Notes ---------


def contains(b: AssertionBuilder, a: Assertion, fn="contains", want_list=False) -> list[Point]:
    """``contains``/``icontains`` (text) and ``contains-any``/``icontains-any`` (a list): negated by the function."""
    value = b.assertion_value(a, want_list=want_list)
    if value is None:
        return []
    fn = ("not_" if a.negate else "") + fn
    a.rep.map(f"{a.item['type']} -> ${fn}")
    return b.fn_points(a, fn, value, inverted=False)


def contains_all(b: AssertionBuilder, a: Assertion, lower=False) -> list[Point]:
    values = b.assertion_value(a, want_list=True)
    if values is None:
        return []
    subject = "r.toLowerCase()" if lower else "r"
    wanted = json.dumps([v.lower() for v in values] if lower else values, ensure_ascii=False)
    a.rep.map(f"{a.item['type']} -> $js (every value, all or nothing)")
    return b.js_points(a, f"{wanted}.every(v => {subject}.includes(v))")


def starts_with(b: AssertionBuilder, a: Assertion, method="startsWith") -> list[Point]:
    value = b.assertion_value(a)
    if value is None:
        return []
    a.rep.map(f"{a.item['type']} -> $js (both sides trimmed, as AgentV)")
    return b.js_points(a, f"r.trim().{method}({json.dumps(value.strip(), ensure_ascii=False)})")


def equals(b: AssertionBuilder, a: Assertion) -> list[Point]:
    value = b.assertion_value(a)
    if value is None:
        return []
    a.rep.map(f"{a.item['type']} -> $equals (trimmed)")
    return b.fn_points(a, "equals", value)


def regex(b: AssertionBuilder, a: Assertion) -> list[Point]:
    item, path, negate, rep = a.item, a.path, a.negate, a.rep
    from ..jsregex import RegexError, compile_js

    b.unknown_item_keys(item, path, ("value", "flags"))
    value = b.value_of(item, path)
    if value is None:
        return []
    flags = item.get("flags") or ""
    if not isinstance(flags, str) or not re.fullmatch(r"[dgimsuvy]*", flags):
        b.notes.error("`flags` must be JavaScript regex flags such as `i` or `ms`", item, "flags", (*path, "flags"),
                      code="regex")
        return []
    try:
        compile_js(value, ignore_case="i" in flags)
    except RegexError as exc:
        b.notes.error(f"the regex does not compile: {exc.message}", item, "value", (*path, "value"),
                      "fix the pattern", "regex")
        return []
    rep.map(f"{item['type']} -> $matches")
    if flags in ("", "i", "g", "gi", "ig"):
        fn = ("not_" if negate else "") + ("imatches" if "i" in flags else "matches")
        return b.fn_points(a, fn, value, inverted=False)
    expression = f"new RegExp({json.dumps(value)}, {json.dumps(flags.replace('g', ''))}).test(r)"
    return b.js_points(a, expression)


def is_json(b: AssertionBuilder, a: Assertion) -> list[Point]:
    item, path, rep = a.item, a.path, a.rep
    b.unknown_item_keys(item, path, ())
    rep.map("is_json -> $js (any JSON value, as AgentV)")
    return b.js_points(a, "(() => { try { JSON.parse(r); return true } catch (e) { return false } })()")


def rubrics(b: AssertionBuilder, a: Assertion) -> list[Point]:
    item, path, weight, check_id, negate, prompt = a.item, a.path, a.weight, a.check_id, a.negate, a.prompt
    rep = a.rep
    b.unknown_item_keys(item, path, ("criteria", "rubrics", "model"))
    key = "criteria" if "criteria" in item else ("rubrics" if "rubrics" in item else None)
    if key is None:
        b.notes.error("a `rubrics` assertion needs `criteria:` (a list of rubric items)", item, None, path,
                      "add `criteria:` with `- id: ...` and `outcome: ...` items", "rubrics")
        return []
    if "model" in item:
        rep.approx("rubric judge model", "the run's judges judge every criterion")
    return b.rubrics_points(item[key], item, key, (*path, key), weight, check_id, negate, prompt, rep,
                               source="rubrics")


def rubric(b: AssertionBuilder, a: Assertion) -> list[Point]:
    item, path = a.item, a.path
    b.notes.warn("`type: rubric` is AgentV's deprecated name; write `type: rubrics` with `criteria:`", item, "type",
                 (*path, "type"), code="deprecated")
    return rubrics(b, a)


def llm_judge(b: AssertionBuilder, a: Assertion) -> list[Point]:
    item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
    prompt, rep, label = a.prompt, a.rep, a.label
    b.unknown_item_keys(item, path, ("prompt", "rubrics", "criteria", "model", "config", "target",
                                        "judge_target", "max_steps", "temperature"))
    if "model" in item or "judge_target" in item:
        rep.approx("judge model", "the run's judges judge this point")
    if item.get("rubrics"):
        return b.rubrics_points(item["rubrics"], item, "rubrics", (*path, "rubrics"), weight, check_id, negate,
                                   prompt, rep, source="llm_judge rubrics")
    template = item.get("prompt")
    if isinstance(template, dict):
        rep.unsupported_(f"llm_judge {label}: prompt builder command", "a command that prints the judge prompt "
                                                                      "runs code; not supported")
        return []
    if template is None:
        if not b.reader.criteria:
            b.notes.error("an `llm_judge` needs `prompt:` (a file or text), `rubrics:`, or the test's `criteria`",
                          item, None, path, code="llm-judge")
            return []
        rep.approx(f"llm_judge {label}", "one judged point states the criteria (judged on evalsite's scale)")
        return [judged_point(b.reader.criteria, weight=weight, origin=origin, check_id=check_id, inverted=negate,
                             label=label)]
    if not isinstance(template, str) or not template.strip():
        b.notes.error("`prompt` must be a file path or the judge's instructions", item, "prompt", (*path, "prompt"),
                      code="llm-judge")
        return []
    text = template
    looks_like_file = "\n" not in template and re.search(r"\.(md|txt|prompt|j2|jinja)$", template.strip(), re.I)
    if looks_like_file or normalize_relative(template) in b.reader.files:
        loaded = b.reader.companion(template)
        if loaded is None:
            b.reader.missing_file(template, item, "prompt", (*path, "prompt"), "judge prompt file")
            return []
        text = loaded
    variables = set(TEMPLATE_VARIABLE.findall(text))
    if variables and not variables & {"answer", "candidate_answer", "expected_output", "output"}:
        b.notes.error("a custom judge prompt must use `{{ answer }}` (or `{{ expected_output }}`)", item, "prompt",
                      (*path, "prompt"), "AgentV rejects a judge prompt that never shows the answer", "llm-judge")
        return []
    criterion = b.render_judge_prompt(text)
    rep.approx(f"llm_judge {label}", "the custom judge prompt is filled in once and judged as one criterion on "
                                     "evalsite's scale (the response is shown to the judge as usual)")
    return [judged_point(criterion, weight=weight, origin=origin, check_id=check_id, inverted=negate,
                         label=label)]


def agent_judge(b: AssertionBuilder, a: Assertion) -> list[Point]:
    item, path, rep, label = a.item, a.path, a.rep, a.label
    rep.unsupported_(f"agent_judge {label}", "an agentic judge works in the agent's workspace; " + NOT_AN_AGENT)
    b.notes.warn("`agent_judge` needs an agent's workspace; it is left out", item, "type", (*path, "type"),
                 code="unsupported")
    return []


def code_judge(b: AssertionBuilder, a: Assertion) -> list[Point]:
    item, path, rep, label = a.item, a.path, a.rep, a.label
    key = "command" if "command" in item else ("script" if "script" in item else None)
    if key is None:
        b.notes.error("a `code_judge` needs `command:` (or `script:`) as a list of program and arguments", item, None,
                      path, 'e.g. `command: ["python", "judges/check.py"]`', "code-judge")
        return []
    argv = code_judge_argv(b, a, key)
    if argv is None:
        return []
    code_judge_scripts(b, a, key, argv)
    if item.get("target") not in (None, False):
        rep.unsupported_(f"code_judge {label}: target", "the LLM proxy for scripts is not offered; the script "
                                                        "runs without it")
    args: dict[str, Any] = {"command": argv}
    cwd = item.get("cwd")
    if isinstance(cwd, str) and cwd.strip():
        relative = normalize_relative(cwd)
        if relative is None or relative.startswith(".."):
            b.notes.error("`cwd` must be a folder inside the suite's folder", item, "cwd", (*path, "cwd"),
                          code="code-judge")
            return []
        args["cwd"] = relative
    if is_number(item.get("timeout_s")) and 0 < item["timeout_s"] <= 600:
        args["timeout_s"] = item["timeout_s"]
    config = b.code_judge_config(item, path, rep, label)
    if config is not None:
        args["config"] = config
    args["criteria"] = b.reader.criteria or ""
    expected = b.reader.expected or {}
    args["reference_answer"] = expected.get("reference") or ""
    args["expected_output"] = expected.get("messages")
    rep.map(f"code_judge {label} -> $code_judge (runs only where the operator allows script graders)")
    return b.fn_points(a, "code_judge", args)


def code_judge_argv(b: AssertionBuilder, a: Assertion, key: str) -> list[str] | None:
    """The program and its arguments: a list as written, a text split as a POSIX shell would (never run by one);
    a script file alone runs with its interpreter, as AgentV runs it."""
    item, path, rep, label = a.item, a.path, a.rep, a.label
    value = item[key]
    argv = list(value) if isinstance(value, list) and value and all(isinstance(t, str) and t for t in value) else None
    if isinstance(value, str) and value.strip():
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            b.notes.error(f"the command cannot be split into arguments: {exc}", item, key, (*path, key),
                          "write it as a list: [program, arg, ...]", "code-judge")
            return None
        rep.approx(f"code_judge {label}: command as text", "split into arguments as a POSIX shell would; it never "
                                                           "runs through a shell")
    if not argv or not all(argv):
        b.notes.error("the command must be a non-empty list of text: [program, arg, ...]", item, key, (*path, key),
                      code="code-judge")
        return None
    if len(argv) == 1 and re.search(r"\.(ts|js|mjs)$", argv[0]):
        rep.approx(f"code_judge {label}: a script file alone", "run as `bun run <file>`, as AgentV does")
        return ["bun", "run", argv[0]]
    if len(argv) == 1 and argv[0].endswith(".py"):
        rep.approx(f"code_judge {label}: a script file alone", "run as `python3 <file>`")
        return ["python3", argv[0]]
    return argv


def code_judge_scripts(b: AssertionBuilder, a: Assertion, key: str, argv: list[str]) -> None:
    """The scripts the command names come along as companion files; one that did not is a warning."""
    for token in argv[1:] + argv[:1]:
        if re.search(r"\.(ts|js|mjs|py|sh|rb)$", token) and normalize_relative(token) not in b.reader.files:
            why = b.reader.file_problem(token)
            b.notes.warn(f"the script '{token}' " + (f"could not be read: {why}" if why else "did not come with the "
                         "suite") + "; the grader will fail when it runs", a.item, key, (*a.path, key),
                         "import the suite's folder so its scripts come along", "missing-file")
        elif normalize_relative(token) in b.reader.files:
            b.reader.companion(token)


def composite(b: AssertionBuilder, a: Assertion) -> list[Point]:
    item, path, weight, check_id, negate, prompt = a.item, a.path, a.weight, a.check_id, a.negate, a.prompt
    rep, label = a.rep, a.label
    b.unknown_item_keys(item, path, ("assert", "evaluators", "assertions", "aggregator"))
    key = next((k for k in ("assert", "assertions", "evaluators") if k in item), None)
    if key is None:
        b.notes.error("a `composite` needs `assert:` (its child assertions)", item, None, path, code="composite")
        return []
    children = b.reader.assert_list(item, key, (*path, key))
    aggregator = item.get("aggregator") or {"type": "weighted_average"}
    if not isinstance(aggregator, dict):
        b.notes.error("`aggregator` must be a mapping with `type`", item, "aggregator", (*path, "aggregator"),
                      code="composite")
        return []
    agg_type = kind_of(aggregator.get("type")) or "weighted_average"
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
        b.notes.error("`aggregator.weights` must map child names to weights", aggregator, "weights",
                      (*path, "aggregator", "weights"), code="composite")
        return []
    named = [(c, cont, i, p, c.get("name") if isinstance(c, dict) else None) for c, cont, i, p in children]
    for wname, wvalue in weights.items():
        if not is_number(wvalue) or wvalue < 0:
            b.notes.error(f"the weight of '{wname}' must be a number >= 0", weights, wname,
                          (*path, "aggregator", "weights", wname), code="weight")
            return []
        if wname not in {n for *_, n in named}:
            b.notes.warn(f"`aggregator.weights` names '{wname}', which is no child's `name`", weights, wname,
                         (*path, "aggregator", "weights", wname), code="composite", at_key=True)
    shares = [float(weights.get(n, 1.0)) if n else 1.0 for *_, n in named]
    total = sum(shares)
    points = []
    for (child, container, index, cpath, _), share in zip(named, shares):
        scale = weight * (share / total) if total > 0 else 0.0
        points.extend(b.assertion(child, container, index, cpath, prompt, rep, scale, check_id))
    if negate:
        points = [p.model_copy(update={"inverted": not p.inverted}) for p in points]
    return points


def tool_trajectory(b: AssertionBuilder, a: Assertion) -> list[Point]:
    item, path, rep = a.item, a.path, a.rep
    b.unknown_item_keys(item, path, ("mode", "expected", "minimums", "args_match"))
    mode = item.get("mode")
    if mode not in TRAJECTORY_MODES_ALL:
        b.notes.error(f"`tool_trajectory` mode must be one of any_order, in_order, exact; not {short(mode)}", item,
                      "mode" if "mode" in item else None, (*path, "mode"),
                      choice_hint(mode, TRAJECTORY_MODES_SEED) + " (later AgentV versions also read superset "
                                                                   "and subset)", "trajectory")
        return []
    args: dict[str, Any] = {"mode": mode}
    if item.get("expected") is not None:
        args["expected"] = trajectory_calls(b, a)
        if args["expected"] is None:
            return []
    minimums = item.get("minimums")
    if minimums is not None:
        if not isinstance(minimums, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                     for v in minimums.values()):
            b.notes.error("`minimums` maps tool names to whole numbers of calls", item, "minimums",
                          (*path, "minimums"), code="trajectory")
            return []
        args["minimums"] = minimums
    if item.get("args_match") in ARGS_MATCH_MODES or field_list(item.get("args_match")):
        args["args_match"] = item["args_match"]
    if mode != "any_order" and not args.get("expected"):
        b.notes.error(f"mode `{mode}` needs `expected:` (the calls, in order)", item, None, path, code="trajectory")
        return []
    if mode == "any_order" and not args.get("expected") and not args.get("minimums"):
        b.notes.error("mode `any_order` needs `minimums:` or `expected:`", item, None, path, code="trajectory")
        return []
    rep.map(f"tool_trajectory ({mode}) -> $tool_trajectory")
    tool_calls_read(b, rep)
    return b.fn_points(a, "tool_trajectory", args)


def tool_calls_read(b: AssertionBuilder, rep) -> None:
    """Where the tool calls come from: the native loop over the suite's `tools` and mocks, else TOOL_CALL lines."""
    if getattr(b.reader, "native_tools", False):
        rep.map("tool calls -> the native tool loop's trajectory (the suite's tools and mocks)")
    else:
        rep.approx("tool calls", "read from the TOOL_CALL lines the model writes (trace-only): declare the suite's "
                                 "`tools` with `mocks` and `toolUse: {mode: native}` to run a native tool loop")


def trajectory_calls(b: AssertionBuilder, a: Assertion) -> list[dict] | None:
    """The ``expected`` calls of a trajectory, each ``{tool, args?, args_match?}``; None (after an error) when one
    is wrongly written."""
    expected, path, rep = a.item["expected"], a.path, a.rep
    if not isinstance(expected, list):
        b.notes.error("`expected` must be a list of `{tool, args}`", a.item, "expected", (*path, "expected"),
                      code="trajectory")
        return None
    clean = []
    for index, entry in enumerate(expected):
        epath = (*path, "expected", index)
        if not isinstance(entry, dict) or not isinstance(entry.get("tool"), str) or not entry["tool"]:
            b.notes.error("each expected call needs `tool:` (the tool's name)", expected, index, epath,
                          code="trajectory")
            return None
        one = {"tool": entry["tool"]}
        if entry.get("args") is not None:
            if entry["args"] != "any" and not isinstance(entry["args"], dict):
                b.notes.error("`args` must be a mapping or `any`", entry, "args", (*epath, "args"), code="trajectory")
                return None
            one["args"] = entry["args"]
        if entry.get("args_match") is not None:
            if entry["args_match"] in ARGS_MATCH_MODES or field_list(entry["args_match"]):
                one["args_match"] = entry["args_match"]
            else:
                rep.approx("args_match", f"{short(entry['args_match'])} is no mode nor list of fields: compared as "
                                         "`exact`")
        if "max_duration_ms" in entry:
            rep.unsupported_("tool_trajectory max_duration_ms", "tool calls carry no timing in evalsite "
                                                                "(they are read from the response)")
        clean.append(one)
    return clean


def field_list(value: Any) -> bool:
    """AgentV's `args_match` as a list of dot-paths (only those fields are compared)."""
    return isinstance(value, list) and bool(value) and all(isinstance(p, str) and p for p in value)


def field_accuracy(b: AssertionBuilder, a: Assertion) -> list[Point]:
    item, path, rep = a.item, a.path, a.rep
    b.unknown_item_keys(item, path, ("fields", "aggregation"))
    fields = item.get("fields")
    if not isinstance(fields, list) or not fields:
        b.notes.error("`field_accuracy` needs `fields:` (a list of `{path, match}`)", item, "fields" if "fields"
                      in item else None, (*path, "fields"), code="field-accuracy")
        return []
    expected = (b.reader.expected or {}).get("structured")
    if expected is None:
        b.notes.error("`field_accuracy` compares with a structured `expected_output`, and this test has none", item,
                      "type", (*path, "type"), "give the test `expected_output:` as a mapping", "field-accuracy")
        return []
    clean = []
    for index, field in enumerate(fields):
        fpath = (*path, "fields", index)
        if not isinstance(field, dict) or not isinstance(field.get("path"), str):
            b.notes.error("each field needs `path:` (dot notation, e.g. `invoice.total`)", fields, index, fpath,
                          code="field-accuracy")
            return []
        one = {k: field[k] for k in ("path", "match", "required", "weight", "tolerance", "relative", "formats")
               if k in field}
        if one.get("match", "exact") not in ("exact", "numeric_tolerance", "date"):
            b.notes.error("`match` must be exact, numeric_tolerance or date", field, "match", (*fpath, "match"),
                          code="field-accuracy")
            return []
        clean.append(one)
    args = {"expected": expected, "fields": clean}
    aggregation = item.get("aggregation")
    if aggregation is not None:
        if aggregation not in ("weighted_average", "all_or_nothing"):
            b.notes.error("`aggregation` must be weighted_average or all_or_nothing", item, "aggregation",
                          (*path, "aggregation"), code="field-accuracy")
            return []
        args["aggregation"] = aggregation
    from .. import functions

    problem = functions.check_args("field_accuracy", args)
    if problem:
        b.notes.error(problem, item, "fields", (*path, "fields"), code="field-accuracy")
        return []
    rep.map("field_accuracy -> $field_accuracy")
    return b.fn_points(a, "field_accuracy", args)


def metric_limit(b: AssertionBuilder, a: Assertion, *, keys: tuple[str, str], what: str, fn: str,
                 positive: bool = True) -> list[Point]:
    """``latency`` and ``cost``: one limit, under either of its two names."""
    item, path, rep = a.item, a.path, a.rep
    b.unknown_item_keys(item, path, keys)
    limit = b.limit_of(item, path, keys, what, positive=positive)
    if limit is None:
        return []
    rep.map(f"{fn.removesuffix('_under')} -> ${fn}")
    return b.fn_points(a, fn, limit)


def token_usage(b: AssertionBuilder, a: Assertion) -> list[Point]:
    item, path, rep = a.item, a.path, a.rep
    b.unknown_item_keys(item, path, ("max_total", "max_input", "max_output"))
    caps = {}
    for key, name in (("max_total", "total"), ("max_input", "input"), ("max_output", "output")):
        if key in item:
            if not is_number(item[key]) or item[key] <= 0:
                b.notes.error(f"`{key}` must be a number of tokens above 0", item, key, (*path, key), code="metric")
                return []
            caps[name] = item[key]
    if not caps:
        b.notes.error("`token_usage` needs `max_total`, `max_input` or `max_output`", item, None, path,
                      code="metric")
        return []
    rep.map("token_usage -> $tokens_under")
    rep.approx("token_usage max_total", "total is input + output tokens (cached tokens are not reported apart)")
    return b.fn_points(a, "tokens_under", caps)


def execution_metrics(b: AssertionBuilder, a: Assertion) -> list[Point]:
    item, path, origin, weight, check_id, negate = a.item, a.path, a.origin, a.weight, a.check_id, a.negate
    rep, label = a.rep, a.label
    known = ("max_tool_calls", "max_llm_calls", "max_tokens", "max_cost_usd", "max_duration_ms",
             "target_exploration_ratio", "exploration_tolerance")
    b.unknown_item_keys(item, path, known)
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
                b.notes.error(f"`{key}` must be a number (a whole one for counts) of at least 0", item, key,
                              (*path, key), code="metric")
                return []
            checks.append((fn, value, key))
    if "target_exploration_ratio" in item:
        rep.unsupported_("execution_metrics target_exploration_ratio", "needs an agent's exploration trace")
    if not checks:
        if "target_exploration_ratio" not in item:
            b.notes.error("`execution_metrics` needs at least one limit (max_tool_calls, max_llm_calls, max_tokens, "
                          "max_cost_usd, max_duration_ms)", item, None, path, code="metric")
        return []
    rep.map("execution_metrics -> metric checks (" + ", ".join(k for *_, k in checks) + ")")
    if "max_tool_calls" in item:
        tool_calls_read(b, rep)
    if "max_llm_calls" in item:
        rep.map("execution_metrics max_llm_calls -> model calls, each step of a tool loop counted (AgentV counts "
                "assistant messages)")
    share = weight / len(checks)
    return [function_point(fn, value, weight=share, origin=origin, check_id=check_id, inverted=negate,
                           label=f"{label}: {key}") for fn, value, key in checks]


# Assertion type (after TYPE_ALIASES) -> its builder. A type not here is left out with a warning.
BUILDERS: dict[str, Callable[[AssertionBuilder, Assertion], list[Point]]] = {
    "contains": contains,
    "icontains": partial(contains, fn="icontains"),
    "contains_any": partial(contains, fn="contains_any_of", want_list=True),
    "icontains_any": partial(contains, fn="icontains_any_of", want_list=True),
    "contains_all": contains_all,
    "icontains_all": partial(contains_all, lower=True),
    "starts_with": starts_with,
    "ends_with": partial(starts_with, method="endsWith"),
    "equals": equals,
    "regex": regex,
    "is_json": is_json,
    "rubrics": rubrics,
    "rubric": rubric,
    "llm_judge": llm_judge,
    "agent_judge": agent_judge,
    "code_judge": code_judge,
    "composite": composite,
    "tool_trajectory": tool_trajectory,
    "field_accuracy": field_accuracy,
    "latency": partial(metric_limit, keys=("threshold", "max_ms"), what="a number of milliseconds above 0",
                       fn="latency_under"),
    "cost": partial(metric_limit, keys=("budget", "max_usd"), what="an amount in US dollars", fn="cost_under",
                    positive=False),
    "token_usage": token_usage,
    "execution_metrics": execution_metrics,
}
assert set(BUILDERS) == set(KNOWN_TYPES), "every known type has a builder"
