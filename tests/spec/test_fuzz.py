"""The parser never raises on input (issue 12), checked three ways on hostile and fuzzed blueprints.

Every input goes through the paths production runs: ``parse_any`` (what the web, the API and
imports call), ``validate_blueprint --json`` (call_command) and ``/validate/`` (the test client).
Each must answer with diagnostics, never an exception, a 500, or the last-resort ``internal``
error (that one exists so a bug cannot take a page down; finding it here means a bug to fix).

The fuzzing is Hypothesis at a size that runs in seconds, derandomized so ``make test`` is
repeatable; tests/bench/bench_fuzz.py runs 10,000 inputs.
"""

from __future__ import annotations

import functools
import io
import json
import random
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.utils.html import escape
from hypothesis import HealthCheck, given, settings, strategies as st

from blueprints.spec import parse_any
from tests.spec.hostile_cases import CASES, Case

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "weval-configs"
SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"

FUZZ = settings(max_examples=120, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
FUZZ_WEB = settings(FUZZ, max_examples=25)

# Values that broke the parser before (issue 12) or sit on an edge: huge and non-finite numbers,
# wrong shapes, unhashable values where a name is expected, empty text.
HOSTILE_VALUES = [10**300, -(10**300), 1e308, float("inf"), float("-inf"), float("nan"), {"url": 17}, [1], {}, [],
                  None, True, False, -1, 0, "", "x", "$match: (", "javascript:alert(1)", [["a"]], {"a": {"b": [1]}},
                  "{{x}}", {"$ref": "x"}, 2**63, "CORE", ["CORE", 1]]
# Text that is no path but looks like one, or is too long or too odd to be one (issue 24: a 300-byte
# `expected_output` on one line was looked up as a file name and raised ENAMETOOLONG).
ODD_TEXTS = ["x" * 256, "é" * 200 + ".md", "a" * 4097, "answer " * 700, "nul\x00byte.md", "\ud800", "\udc80x.md",
             "\x01\x02\x1b[31mred\x7f", "../../etc/passwd", "/dev/zero", "/proc/self/environ", "file:///etc/passwd",
             "file://" + "f" * 300 + ".yaml", "./" + "d/" * 150 + "x.md", "C:\\x.md", "*" * 300, "..", "/", ".",
             "tests/", "./cases/", "**/*.yaml", "file://../*.jsonl"]
HOSTILE_VALUES += ODD_TEXTS
KEYS = ["models", "temperature", "temperatures", "system", "systems", "author", "references", "citation", "weight",
        "should", "should_not", "points", "prompt", "messages", "ideal", "id", "fn", "fnArgs", "point_defs",
        "evaluationConfig", "render_as", "tools", "trials", "verdicts", "threshold", "tests", "input", "criteria",
        "assert", "type", "suite", "cases", "expected", "evaluators", "score_threshold", "max_tokens", "command",
        "strategy", "parameters", "$contains", "$word_count_between", "$ref", "$match", "text"]


def _documents(folder: Path, patterns=("*.yml", "*.yaml", "*.json")) -> list[tuple[str, list]]:
    out = []
    for pattern in patterns:
        for path in sorted(folder.rglob(pattern)):
            if "models" in path.parts:
                continue
            try:
                out.append((path.suffix, list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=_LOADER))))
            except (yaml.YAMLError, UnicodeDecodeError):
                continue
    return out


# libyaml's loader where PyYAML has it (the seeds load in 1 s instead of 12); read when a test first draws one,
# not when the module is collected (every test process collected it).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def documents() -> list[tuple[str, list]]:
    return _documents(CORPUS) + _documents(SEEDS)


class _Dumper(yaml.SafeDumper):
    pass


# Keep huge ints as plain digits (PyYAML would write them as-is anyway; this makes it explicit).
_Dumper.add_representer(int, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:int", str(value)))


def mutate(value, rng: random.Random):
    """A copy of a loaded document with values swapped for hostile ones, keys dropped and keys added."""
    if rng.random() < 0.06:
        return rng.choice(HOSTILE_VALUES)
    if isinstance(value, dict):
        out = {k: mutate(v, rng) for k, v in value.items() if rng.random() > 0.03}
        if rng.random() < 0.05:
            out[rng.choice(KEYS)] = rng.choice(HOSTILE_VALUES)
        return out
    if isinstance(value, list):
        return [mutate(v, rng) for v in value]
    return value


def text_mutations(text: str, rng: random.Random, count: int) -> str:
    chars = list(text)
    for _ in range(count):
        if not chars:
            break
        chars[rng.randrange(len(chars))] = rng.choice(":-[]{}&*!|>\"'\n #0\t\\,?%@`")
    return "".join(chars)


@st.composite
def mutated_corpus_file(draw) -> str:
    suffix, docs = draw(st.sampled_from(documents()))
    rng = random.Random(draw(st.integers(0, 2**32)))
    mutated = [mutate(d, rng) for d in docs]
    if suffix == ".json" and len(mutated) == 1 and draw(st.booleans()):
        text = json.dumps(mutated[0], allow_nan=True)
    else:
        text = yaml.dump_all(mutated, Dumper=_Dumper, allow_unicode=True, sort_keys=False)
    edits = draw(st.integers(0, 6))
    return text_mutations(text, rng, edits) if edits else text


long_texts = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), min_size=256, max_size=300),
    st.builds(lambda ch, n: ch * n, st.sampled_from(["x", "é", "/", ".", "\x00", "€"]), st.integers(128, 5000)),
)
odd_texts = st.one_of(st.sampled_from(ODD_TEXTS), long_texts,
                      st.text(st.characters(codec=None, blacklist_categories=()), max_size=12))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(10**320), 10**320), st.floats(allow_nan=True),
                    st.text(max_size=20), odd_texts,
                    st.sampled_from(HOSTILE_VALUES[:6] + ["CORE", "openai:gpt-4o", "$contains"]))
structures = st.recursive(scalars, lambda children: st.one_of(
    st.lists(children, max_size=5), st.dictionaries(st.sampled_from(KEYS), children, max_size=6)), max_leaves=40)


@st.composite
def generated_blueprint(draw) -> str:
    header = draw(st.dictionaries(st.sampled_from(KEYS), structures, max_size=8))
    prompts = draw(st.lists(st.dictionaries(st.sampled_from(KEYS), structures, max_size=6), max_size=4))
    form = draw(st.sampled_from(["yaml-stream", "yaml-one", "json"]))
    if form == "json":
        return json.dumps({**header, "prompts": prompts}, allow_nan=True)
    if form == "yaml-one":
        return yaml.dump({**header, "prompts": prompts}, Dumper=_Dumper, allow_unicode=True)
    return yaml.dump_all([header, prompts], Dumper=_Dumper, allow_unicode=True)


def _agentv_places(odd: str) -> list[dict]:
    """An AgentV suite for each place a text can stand: where a path is meant, and where it is not."""
    test = {"id": "t", "criteria": "answers", "input": "hi"}
    block = {"role": "user", "content": [{"type": "text", "value": "hi"}, {"type": "file", "value": odd}]}
    return [
        {"tests": [{**test, "expected_output": odd}]},
        {"tests": [{**test, "criteria": odd, "input": odd}]},
        {"tests": [{**test, "input": [block]}]},
        {"tests": [{**test, "expected_output": [{"type": "file", "value": odd}]}]},
        {"tests": [{**test, "assert": [odd, {"type": "contains", "value": odd}]}]},
        {"tests": [{**test, "assert": [{"name": "j", "type": "llm-grader", "prompt": odd}]}]},
        {"tests": [{**test, "assert": [{"name": "c", "type": "code-grader", "command": ["python3", odd]}]}]},
        {"tests": [{**test, "rubrics": [odd, {"id": "r", "score_ranges": {0: odd, 10: "all"}}]}]},
        {"assertions": [odd], "tests": [test]},
        {"tests": odd},
        {"tests": [test, odd, "file://" + odd]},
        {"description": odd, "input": [block], "tests": [test]},
    ]


@st.composite
def agentv_suite_with_odd_text(draw) -> str:
    odd = draw(odd_texts)
    suite = draw(st.sampled_from(_agentv_places(odd)))
    if draw(st.booleans()):
        return json.dumps(suite)
    return yaml.dump(suite, Dumper=_Dumper, allow_unicode=True, sort_keys=False)


def assert_answered(result) -> None:
    """Diagnostics, not a crash: no internal error, and every error located."""
    internal = [d for d in result.errors if d.code == "internal"]
    assert not internal, "parse_any hit an unexpected exception (see the log); fix its cause"
    for d in result.errors:
        assert d.line and d.column and d.message


# --- the hostile table -----------------------------------------------------------------------


def _matches(case: Case, error: dict) -> bool:
    text = error["message"] + " " + (error.get("hint") or "")
    return (error["code"], error["line"], error["column"]) == (case.code, case.line, case.column) and all(
        w in text for w in case.words)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_hostile_blueprint_gets_one_located_error(case):
    result = parse_any(case.text)
    assert not result.ok and result.blueprint is None
    assert _matches(case, result.errors[0].as_dict()), result.errors[0]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_validate_blueprint_json_reports_a_hostile_file_and_exits_1(case, tmp_path):
    path = tmp_path / ("case.json" if case.text.lstrip().startswith("{") else "case.yml")
    path.write_text(case.text, encoding="utf-8")
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("validate_blueprint", str(path), "--json", stdout=out, stderr=io.StringIO())
    assert exit_.value.code == 1
    [report] = json.loads(out.getvalue())
    assert not report["ok"] and _matches(case, report["errors"][0])


@pytest.mark.django_db
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_live_validation_shows_a_hostile_blueprint_s_error(client, case):
    response = client.post("/validate/", {"text": case.text}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert escape(case.words[0]) in response.text
    assert len(response.content) < 200_000  # a refused bomb is never rendered


# --- fuzzing ---------------------------------------------------------------------------------


@FUZZ
@given(mutated_corpus_file())
def test_mutated_corpus_files_never_raise(text):
    assert_answered(parse_any(text))


@FUZZ
@given(generated_blueprint())
def test_generated_structures_never_raise(text):
    assert_answered(parse_any(text))


@FUZZ
@given(agentv_suite_with_odd_text())
def test_agentv_suites_with_long_odd_or_path_like_text_never_raise_from_a_file(tmp_path, text):
    """Read from a file, as ``validate_blueprint`` reads it, so the files the suite names are looked up on disk."""
    from blueprints.spec.files import validate_file

    path = tmp_path / "EVAL.yaml"
    path.write_text(text, encoding="utf-8")
    assert_answered(validate_file(path, root=tmp_path).result)


@FUZZ_WEB
@given(st.one_of(mutated_corpus_file(), generated_blueprint(), agentv_suite_with_odd_text()))
def test_validate_blueprint_json_never_raises_on_fuzzed_files(tmp_path, text):
    path = tmp_path / "fuzzed.yml"
    path.write_text(text, encoding="utf-8")
    out = io.StringIO()
    try:
        call_command("validate_blueprint", str(path), "--json", stdout=out, stderr=io.StringIO())
    except SystemExit as exit_:
        assert exit_.code == 1
    [report] = json.loads(out.getvalue())
    assert all(e["code"] != "internal" for e in report["errors"])


@pytest.mark.django_db
@FUZZ_WEB
@given(st.one_of(mutated_corpus_file(), generated_blueprint()))
def test_live_validation_never_answers_500_on_fuzzed_text(client, text):
    response = client.post("/validate/", {"text": text}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert "internal error" not in response.text


# --- the last resort and the preview's cap ---------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(length=st.integers(1, 400_000), uses=st.integers(1, 60), where=st.sampled_from(["prompt", "ideal", "model"]))
def test_a_long_anchored_text_used_many_times_is_bounded_by_what_it_expands_to(length, uses, where):
    """The character bound counts an alias's anchor each time it is used (not once): refused exactly when
    what the text expands to passes the limit, before anything is built, with the located error."""
    value = "a" * length if where != "model" else "openai:" + "m" * length
    models = "[*long]" if where == "model" else "[openai:x]"
    text = (f"title: t\nlong: &long {value}\nmodels: {models}\nprompts:\n"
            + "".join(f"  - prompt: {'*long' if where == 'prompt' else 'hi'}\n"
                      + ("    ideal: *long\n" if where == "ideal" else "") + "    should: [says hi]\n"
                      for _ in range(uses if where != "model" else 1)))
    if where == "model":
        text = text.replace("models: [*long]", "models: [" + ", ".join(["*long"] * uses) + "]")
    result = parse_any(text)
    expanded = len(value) * (1 + uses)
    limited = [e for e in result.errors if e.code == "limit" and "aliases are expanded" in e.message]
    if expanded > 5_000_000 + len(text):
        assert limited and limited[0].line >= 2
    elif expanded < 4_900_000:
        assert not limited


def test_an_unexpected_exception_becomes_one_logged_internal_error(monkeypatch, caplog):
    from blueprints.spec import dialects

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(dialects, "parse_loaded", broken)
    result = parse_any("models: [openai:x]\n---\n- prompt: hi\n  should: [says hi]\n", path="bp.yml")
    [error] = result.errors
    assert error.code == "internal" and (error.line, error.column) == (1, 1) and result.blueprint is None
    assert "parsing bp.yml raised" in caplog.text and "RuntimeError: a bug" in caplog.text


def test_the_preview_lists_at_most_the_variant_limit_and_says_how_many_there_are():
    from blueprints.preview import build_preview
    from blueprints.spec.limits import Limits

    text = "models: [openai:a, openai:b]\ntemperatures: [0, 0.5]\n---\n- prompt: hi\n  should: [says hi]\n"
    preview = build_preview(parse_any(text).blueprint, None, Limits(max_variants=3))
    assert len(preview.variants) == 3 and preview.variant_count == 4 and preview.variants_truncated
    assert not build_preview(parse_any(text).blueprint, None).variants_truncated
    from django.template.loader import render_to_string

    html = render_to_string("blueprints/_preview.html", {"preview": preview})
    assert "3 of 4 listed" in html and "EVALSITE_MAX_VARIANTS" in html


@pytest.mark.django_db
@pytest.mark.parametrize("case", [c for c in CASES if len(c.text) < 1_000_000], ids=lambda c: c.name)
def test_a_hostile_blueprint_saved_as_a_draft_keeps_its_pages_answering(client, case):
    from blueprints.models import Blueprint

    blueprint = Blueprint.objects.create(slug="hostile", title="Hostile")
    revision, _ = blueprint.save_revision(case.text)
    assert revision.error_count >= 1
    for url in ("/blueprints/hostile/", "/blueprints/hostile/edit/"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert len(response.content) < 2_000_000
