"""Extension functions on the response's text and structure: `$equals`, `$json_matches_schema`,
`$field_accuracy`, and `$tool_trajectory` on the tool-call trace.

They bring AgentV's and AI Eval's deterministic checks to blueprints (docs/points.md,
"Checks from other suite formats"); the semantics follow reference sections 2.3,
2.6 and 3.5, written from those descriptions.
"""

from __future__ import annotations

import json
import math
import re
from datetime import date, datetime

from blueprints.spec.jsregex import RegexError, search_js
from blueprints.spec.limits import DEFAULT_LIMITS, Limits

from .result import PointResult, not_evaluated, scored

_FENCE = re.compile(r"^\s*```[\w-]*\s*\n(.*?)\n?\s*```\s*$", re.S)


# --- $equals ------------------------------------------------------------------------------


def equals(response: str, args: object) -> PointResult:
    if isinstance(args, str):
        expected, trim = args, True
    elif isinstance(args, dict) and isinstance(args.get("value"), str):
        expected, trim = args["value"], bool(args.get("trim", True))
    else:
        return not_evaluated("Invalid arguments for 'equals'. Expected a string or {value, trim}.")
    actual = response.strip() if trim else response
    wanted = expected.strip() if trim else expected
    if actual == wanted:
        return scored(True)
    return scored(False, f"The response is not exactly {json.dumps(wanted[:80])}"
                         + (" (after trimming both)" if trim else "") + ".")


# --- $json_matches_schema ------------------------------------------------------------------


def _bounded_validator(validator_class, limits: Limits):
    """`validator_class` with `pattern` and `patternProperties` run as JavaScript regexes through
    `search_js` (JSON Schema patterns are ECMA-262), so each match is time-limited."""
    import jsonschema

    def pattern(validator, source, instance, schema):
        if validator.is_type(instance, "string") and search_js(source, instance, limits=limits) is None:
            yield jsonschema.ValidationError(f"{instance!r} does not match {source!r}")

    def pattern_properties(validator, patterns, instance, schema):
        if not validator.is_type(instance, "object"):
            return
        for source, subschema in patterns.items():
            for key, value in instance.items():
                if search_js(source, key, limits=limits) is not None:
                    yield from validator.descend(value, subschema, path=key, schema_path=source)

    return jsonschema.validators.extend(validator_class, {"pattern": pattern, "patternProperties": pattern_properties})


def json_matches_schema(response: str, args: object, limits: Limits = DEFAULT_LIMITS) -> PointResult:
    """The whole response (no fences, no prose) must be one JSON value valid against the schema.

    Raises RegexTimeout when a schema pattern runs past the limit (evaluate_point reports it)."""
    import jsonschema

    if not isinstance(args, dict):
        return not_evaluated("Invalid arguments for 'json_matches_schema'. Expected a JSON Schema mapping.")
    try:
        value = json.loads(response)
    except (ValueError, RecursionError) as exc:
        return scored(False, f"The response is not JSON ({str(exc)[:80]}).")
    try:
        validator_class = jsonschema.validators.validator_for(args, default=jsonschema.Draft202012Validator)
        validator_class.check_schema(args)
        validator = _bounded_validator(validator_class, limits)(args)
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    except jsonschema.SchemaError as exc:
        return not_evaluated(f"The JSON Schema is invalid: {exc.message}")
    except RegexError as exc:
        return not_evaluated(f"The JSON Schema has a pattern that cannot run: {exc.message}")
    if not errors:
        return scored(True, "The response is JSON that matches the schema.")
    shown = "; ".join(f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors[:3])
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return scored(False, f"The JSON does not match the schema: {shown}{more}.")


# --- $field_accuracy -------------------------------------------------------------------------


def extract_json(text: str) -> object:
    """The JSON a response carries: the whole text, a fenced block, or the first ``{...}`` span."""
    for candidate in (text, *(m.group(1) for m in [_FENCE.match(text)] if m)):
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        return json.loads(text[start:end + 1])
    raise ValueError("no JSON object found in the response")


_MISSING = object()


def lookup_path(value: object, path: str) -> object:
    """``a.b[0].c`` or ``a.b.0.c`` inside nested mappings and lists; _MISSING when absent."""
    parts = [p for p in re.split(r"\.|\[(\d+)\]", path) if p]
    for part in parts:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


_DATE_FORMATS = {
    "ISO": ("%Y-%m-%d",),
    "YYYY-MM-DD": ("%Y-%m-%d",),
    "DD-MMM-YYYY": ("%d-%b-%Y", "%d %b %Y"),
    "MM/DD/YYYY": ("%m/%d/%Y",),
    "DD/MM/YYYY": ("%d/%m/%Y",),
    "MM-DD-YYYY": ("%m-%d-%Y",),
    "DD-MM-YYYY": ("%d-%m-%Y",),
}
_DEFAULT_DATE_ORDER = ("ISO", "DD-MMM-YYYY", "MM/DD/YYYY", "DD/MM/YYYY")


def normalize_date(value: object, formats: list[str] | None = None) -> date | None:
    if not isinstance(value, str):
        return None
    text = value.strip()
    iso = re.match(r"^(\d{4}-\d{2}-\d{2})(?:[T ].*)?$", text)
    if iso:
        text = iso.group(1)
    for name in formats or _DEFAULT_DATE_ORDER:
        for pattern in _DATE_FORMATS.get(name.upper() if name.upper() == "ISO" else name, ()):
            try:
                return datetime.strptime(text, pattern).date()
            except ValueError:
                continue
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.replace(",", "").strip())
        except ValueError:
            return None
    return None


def _field_matches(actual: object, expected: object, spec: dict) -> tuple[bool, str]:
    match = spec.get("match", "exact")
    if match == "numeric_tolerance":
        a, e = _number(actual), _number(expected)
        if a is None or e is None:
            return False, f"{json.dumps(actual)} is not a number"
        tolerance = float(spec.get("tolerance", 0))
        difference = abs(a - e)
        allowed = tolerance * abs(e) if spec.get("relative") else tolerance
        return difference <= allowed + 1e-12, f"{a:g} vs {e:g} (difference {difference:g}, allowed {allowed:g})"
    if match == "date":
        a, e = normalize_date(actual, spec.get("formats")), normalize_date(expected, spec.get("formats"))
        if a is None or e is None:
            return False, f"{json.dumps(actual)} is not a date we can read"
        return a == e, f"{a.isoformat()} vs {e.isoformat()}"
    return deep_equal(actual, expected), f"{json.dumps(actual)[:40]} vs {json.dumps(expected)[:40]}"


def deep_equal(a: object, b: object) -> bool:
    """JSON equality: 1 equals 1.0, but true never equals 1 and "1" never equals 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def field_accuracy(response: str, args: object) -> PointResult:
    if not isinstance(args, dict) or not isinstance(args.get("fields"), list):
        return not_evaluated("Invalid arguments for 'field_accuracy'. Expected {expected, fields}.")
    expected = args.get("expected")
    if isinstance(expected, str):
        try:
            expected = json.loads(expected)
        except ValueError:
            return not_evaluated("The expected value of 'field_accuracy' is text that is not JSON.")
    try:
        actual = extract_json(response)
    except (ValueError, RecursionError):
        return scored(False, "The response holds no JSON object to compare.")
    total = got = 0.0
    hits, misses = [], []
    all_ok = True
    for spec in args["fields"]:
        path = spec["path"]
        weight = float(spec.get("weight", 1))
        want = lookup_path(expected, path)
        have = lookup_path(actual, path)
        if want is _MISSING:
            hits.append(f"{path} (nothing expected)")
            total += weight
            got += weight
            continue
        if have is _MISSING:
            if spec.get("required", True):
                misses.append(f"{path} missing")
                total += weight
                all_ok = False
            else:
                misses.append(f"{path} missing (optional, not counted)")
            continue
        ok, detail = _field_matches(have, want, spec)
        total += weight
        if ok:
            got += weight
            hits.append(path)
        else:
            all_ok = False
            misses.append(f"{path}: {detail}")
    explain = "; ".join(filter(None, ["matched: " + ", ".join(hits[:4]) if hits else "",
                                      "missed: " + ", ".join(misses[:4]) if misses else ""])) + "."
    if args.get("aggregation") == "all_or_nothing":
        return scored(all_ok, explain)
    if total <= 0:
        return not_evaluated("No field of 'field_accuracy' carries weight.")
    return scored(got / total, explain)


# --- $tool_trajectory -------------------------------------------------------------------------


def _args_match(actual: object, expected: object, mode: str | list) -> bool:
    if expected is None or expected == "any" or mode == "ignore":
        return True
    if isinstance(mode, list):  # AgentV's list of dot-paths: only those fields are compared
        return all(deep_equal(lookup_path(actual, path), lookup_path(expected, path)) for path in mode)
    if not isinstance(actual, dict):
        actual = {} if actual is None else actual
    if not isinstance(expected, dict) or not isinstance(actual, dict):
        return deep_equal(actual, expected)
    if mode == "superset":  # expected keys are a part of the actual arguments
        return all(k in actual and deep_equal(actual[k], v) for k, v in expected.items())
    if mode == "subset":  # actual keys are a part of the expected ones
        return all(k in expected and deep_equal(expected[k], v) for k, v in actual.items())
    return deep_equal(actual, expected)


def _item_matches(call: dict, item: dict, default_mode: str) -> tuple[bool, bool]:
    """(same tool, arguments match)."""
    if call.get("name") != item["tool"]:
        return False, False
    return True, _args_match(call.get("arguments"), item.get("args"), item.get("args_match", default_mode))


def tool_trajectory(calls: list[dict], args: object) -> PointResult:
    if not isinstance(args, dict):
        return not_evaluated("Invalid arguments for 'tool_trajectory'.")
    mode = args.get("mode")
    expected = list(args.get("expected") or [])
    default_mode = args.get("args_match", "exact")
    hits: list[str] = []
    misses: list[str] = []
    if mode == "any_order":
        minimums = dict(args.get("minimums") or {})
        if not minimums:
            for item in expected:
                minimums[item["tool"]] = minimums.get(item["tool"], 0) + 1
        for tool, n in minimums.items():
            count = sum(1 for c in calls if c.get("name") == tool)
            (hits if count >= n else misses).append(f"{tool} called {count} of {n} times")
        denominator = len(minimums)
        score = len(hits) / denominator if denominator else 1.0
    elif mode == "in_order":
        position = 0
        for item in expected:
            found = False
            while position < len(calls):
                call = calls[position]
                position += 1
                same, args_ok = _item_matches(call, item, default_mode)
                if same:
                    found = True
                    (hits if args_ok else misses).append(
                        item["tool"] + ("" if args_ok else " (called with other arguments)"))
                    break
            if not found:
                misses.append(f"{item['tool']} not called in order")
        score = len(hits) / len(expected) if expected else 1.0
    elif mode == "exact":
        for index, item in enumerate(expected):
            if index >= len(calls):
                misses.append(f"position {index + 1}: expected {item['tool']}, nothing called")
                continue
            same, args_ok = _item_matches(calls[index], item, default_mode)
            if same and args_ok:
                hits.append(f"position {index + 1}: {item['tool']}")
            else:
                misses.append(f"position {index + 1}: expected {item['tool']}, got {calls[index].get('name')}"
                              + ("" if not same else " with other arguments"))
        length_differs = len(calls) != len(expected)
        if length_differs:
            misses.append(f"{len(calls)} calls made, {len(expected)} expected")
        score = len(hits) / (len(expected) + (1 if length_differs else 0)) if expected else 1.0
    elif mode == "superset":
        unused = list(range(len(calls)))
        for item in expected:
            match = next((i for i in unused if all(_item_matches(calls[i], item, default_mode))), None)
            if match is None:
                misses.append(f"{item['tool']} not called")
            else:
                unused.remove(match)
                hits.append(item["tool"])
        score = len(hits) / len(expected) if expected else 1.0
    elif mode == "subset":
        for call in calls:
            ok = any(all(_item_matches(call, item, default_mode)) for item in expected)
            (hits if ok else misses).append(("" if ok else "not allowed: ") + str(call.get("name")))
        score = len(hits) / len(calls) if calls else 1.0
    else:
        return not_evaluated(f"Unknown tool_trajectory mode '{mode}'.")
    parts = []
    if hits:
        parts.append("hits: " + "; ".join(hits[:4]))
    if misses:
        parts.append("misses: " + "; ".join(misses[:4]))
    explain = f"{len(calls)} tool call{'s' if len(calls) != 1 else ''} ({mode}); " + ("; ".join(parts) or "nothing to check")
    if math.isnan(score):  # pragma: no cover - defensive
        return not_evaluated("tool_trajectory produced no score")
    return scored(score, explain + ".")


# --- $tool_calls_match (AI Eval's expected.tool_calls) ---------------------------------------------


def _ai_eval_value_matches(actual: object, expected: object, limits: Limits) -> bool:
    """Raises RegexTimeout when a `regex:` value runs past the limit (evaluate_point reports it)."""
    if isinstance(expected, str) and expected.startswith("regex:"):
        if not isinstance(actual, str):
            return False
        try:
            return search_js(expected[len("regex:"):], actual, limits=limits) is not None
        except RegexError:
            return False
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _ai_eval_value_matches(actual[k], v, limits)
                                                for k, v in expected.items())
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(actual) == len(expected)
                and all(_ai_eval_value_matches(a, e, limits) for a, e in zip(actual, expected)))
    return deep_equal(actual, expected)


def _expectation_matches(call: dict, expectation: dict, limits: Limits) -> bool:
    if call.get("name") != expectation.get("name"):
        return False
    wanted = expectation.get("args_match") or {}
    arguments = call.get("arguments")
    return _ai_eval_value_matches(arguments if isinstance(arguments, dict) else {}, wanted, limits)


def tool_calls_match(calls: list[dict], args: object, limits: Limits = DEFAULT_LIMITS) -> PointResult:
    """Expectations with ``order: k`` must match exactly the k-th call; the others take the first unused
    call of that name whose arguments match (subset, numbers compared as numbers, ``regex:`` strings).
    Score: matched / total; with ``only_required: true``, 1 when every required expectation matched."""
    if not isinstance(args, dict) or not isinstance(args.get("expected"), list):
        return not_evaluated("Invalid arguments for 'tool_calls_match'. Expected {expected: [...]}.")
    expected = [e for e in args["expected"] if isinstance(e, dict)]
    used: set[int] = set()
    matched: list[bool] = [False] * len(expected)
    for i, exp in enumerate(expected):
        order = exp.get("order") or 0
        if order > 0 and order <= len(calls) and _expectation_matches(calls[order - 1], exp, limits):
            matched[i] = True
            used.add(order - 1)
    for i, exp in enumerate(expected):
        if (exp.get("order") or 0) > 0:
            continue
        hit = next((j for j, call in enumerate(calls) if j not in used and _expectation_matches(call, exp, limits)),
                   None)
        if hit is not None:
            matched[i] = True
            used.add(hit)
    missing = [f"{e.get('name')}" + (f" (order {e['order']})" if e.get("order") else "")
               for e, ok in zip(expected, matched) if not ok]
    if args.get("only_required"):
        required_missing = [f"{e.get('name')}" for e, ok in zip(expected, matched) if e.get("required") and not ok]
        if required_missing:
            return scored(False, "Required tool calls missing: " + ", ".join(required_missing) + ".")
        return scored(True, "Every required tool call was made.")
    total = len(expected)
    explain = f"{sum(matched)} of {total} expected tool calls matched" + (
        f"; missing: {', '.join(missing[:4])}" if missing else "") + "."
    return scored(sum(matched) / total if total else 1.0, explain)
