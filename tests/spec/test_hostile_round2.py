"""Hostile input, second round (issue 23): what a blueprint expands to in characters, model ids repeated by
aliases, wrong-typed values where the readers expected text, and collections linked out of an imported folder.

Each finding is refused with one located error (or, for the symlink, a refused import), never a crash, a hang
or the last-resort "internal error". tests/bench/bench_anchored.py measures the big cases' time and memory.
"""

from __future__ import annotations

import json
import time

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from blueprints.spec import parse_any
from blueprints.spec.collections import is_collection
from blueprints.spec.header_reader import CUSTOM_MODEL_FIELDS, HEADER_KEYS, MAX_MODEL_ID_CHARS, _normalize_model_entry
from blueprints.spec.limits import DEFAULT_LIMITS, Limits
from blueprints.spec.model_ids import is_collection_name, normalize_model_entry
from blueprints.spec.parse import parse_blueprint
from blueprints.spec.point_reader import POINT_OBJECT_KEYS
from blueprints.spec.prompt_reader import PROMPT_KEYS

PROMPT = "---\n- prompt: hi\n  should: [says hi]\n"


def anchored(chars: int, uses: int) -> str:
    """One scalar of ``chars`` characters, anchored once and used as the text of ``uses`` prompts."""
    return ("title: t\nmodels: [openai:gpt-4o-mini]\nlong: &long " + "x" * chars + "\nprompts:\n"
            + "".join("- prompt: *long\n  should: [says hi]\n" for _ in range(uses)))


def first_error(text: str, **kwargs):
    result = parse_blueprint(text, **kwargs)
    assert result.errors, "expected an error"
    return result.errors[0]


# --- 1. characters once aliases are expanded ----------------------------------------------


def test_a_long_anchor_used_a_hundred_times_is_refused_at_the_alias_that_passes_the_limit():
    text = anchored(4_000_000, 100)
    start = time.perf_counter()
    error = first_error(text)
    elapsed = time.perf_counter() - start
    assert error.code == "limit"
    assert (error.line, error.column) == (5, 11)  # the first `*long`: 4,000,000 twice is past 5,000,000
    assert "more than 5,000,000 characters of text once aliases are expanded" in error.message
    assert "the alias `*long` repeats 4,000,000 characters" in error.message
    assert "do not repeat a long anchor" in error.hint and "EVALSITE_MAX_EXPANDED_CHARS" in error.hint
    assert elapsed < 5  # about 0.05 s; the bench measures it against its target


def test_the_limit_is_passed_where_the_total_crosses_it_not_before():
    limits = Limits(max_expanded_chars=10_000)
    ok = anchored(1_000, 8)  # 1,000 + 8 x 1,000 characters plus the short values: under 10,000
    assert parse_blueprint(ok, limits=limits).ok
    error = first_error(anchored(1_000, 12), limits=limits)
    assert error.code == "limit" and (error.line, error.column) == (4 + 2 * 9 - 1, 11)  # the ninth `*long`


def test_an_alias_of_a_mapping_counts_every_character_inside_it():
    rubric = "rubric: &r\n  - " + "a" * 3_000 + "\n  - " + "b" * 3_000 + "\n"
    text = "title: t\nmodels: [openai:x]\n" + rubric + "prompts:\n" + "".join(
        "- prompt: hi\n  should: *r\n" for _ in range(3))
    error = first_error(text, limits=Limits(max_expanded_chars=20_000))
    assert error.code == "limit" and "repeats 6,000 characters" in error.message
    assert (error.line, error.column) == (12, 11)  # the third `*r`: 6,000 x 4 passes 20,000


def test_a_merge_key_counts_as_a_repeat():
    base = "base: &b {text: " + "t" * 5_000 + "}\n"
    text = "title: t\nmodels: [openai:x]\n" + base + "".join(f"k{i}: {{<<: *b}}\n" for i in range(3)) + PROMPT
    error = first_error(text, limits=Limits(max_expanded_chars=12_000))
    assert error.code == "limit" and "`*b`" in error.message and error.line == 5


def test_short_aliases_used_many_times_are_fine():
    text = "title: t\nmodels: [&m openai:gpt-4o-mini]\nx: [" + ", ".join(["*m"] * 5_000) + "]\n" + PROMPT
    result = parse_blueprint(text)
    assert not [e for e in result.errors if e.code == "limit"]


def test_a_blueprint_at_the_text_limit_without_aliases_passes():
    filler = "x" * (DEFAULT_LIMITS.max_text_chars - 200)
    text = "title: t\nmodels: [openai:gpt-4o-mini]\ndescription: " + filler + "\n" + PROMPT
    assert len(text) <= DEFAULT_LIMITS.max_text_chars
    result = parse_blueprint(text)
    assert result.ok, result.errors[:1]


def test_a_character_limit_below_the_text_limit_is_kept_without_aliases_too():
    limits = Limits(max_expanded_chars=2_000)
    text = "title: t\nmodels: [openai:x]\ndescription: " + "d" * 2_500 + "\n" + PROMPT
    error = first_error(text, limits=limits)
    assert error.code == "limit" and (error.line, error.column) == (3, 14)
    as_json = json.dumps({"title": "t", "models": ["openai:x"], "description": "d" * 2_500,
                          "prompts": [{"prompt": "hi", "should": ["says hi"]}]})
    error = first_error(as_json, fmt="json", limits=limits)
    assert error.code == "limit" and (error.line, error.column) == (1, 55)
    assert parse_blueprint(as_json, fmt="json").ok  # the default limit


def test_characters_add_up_across_documents():
    limits = Limits(max_expanded_chars=5_000)
    text = "title: t\nmodels: [openai:x]\n---\n" + "".join(
        f"- prompt: {'p' * 1_000}\n  should: [x]\n" for _ in range(6))
    error = first_error(text, limits=limits)
    assert error.code == "limit" and error.line == 4 + 2 * 4  # the fifth prompt's text


@pytest.mark.django_db
def test_the_live_validation_answers_the_anchored_blueprint_briefly(client):
    response = client.post("/validate/", {"text": anchored(4_000_000, 100)}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert "EVALSITE_MAX_EXPANDED_CHARS" in response.text
    assert len(response.content) < 200_000  # it was 410 MB


@pytest.mark.django_db
def test_a_stored_anchored_draft_keeps_its_pages_small(client):
    from blueprints.models import Blueprint

    blueprint = Blueprint.objects.create(slug="anchored", title="Anchored")
    revision, _ = blueprint.save_revision(anchored(1_000_000, 100))
    assert revision.error_count >= 1
    for url in ("/blueprints/anchored/", "/blueprints/anchored/edit/"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert len(response.content) < 3_000_000, url  # the text itself is 1 MB; it was 105 MB


def test_the_setting_defaults_to_the_text_limit():
    from django.conf import settings as django_settings

    limits = django_settings.EVALSITE_LIMITS
    assert limits.max_expanded_chars == limits.max_text_chars


# --- 1b. a model id repeated by aliases -------------------------------------------------------


def test_a_thousand_aliases_of_a_spaced_out_model_id_parse_in_linear_time():
    text = 'title: t\nmodels: [&m "openai' + " " * 3_000 + 'x"' + ", *m" * 1_000 + "]\n" + PROMPT
    start = time.perf_counter()
    result = parse_blueprint(text)
    assert time.perf_counter() - start < 2  # 16 s before (a quadratic regex per alias); about 0.02 s now
    assert result.blueprint is not None or result.errors


def test_a_long_almost_collection_name_is_refused_where_it_stands():
    text = "title: t\nmodels: [" + "A" * 30_000 + "x]\n" + PROMPT
    start = time.perf_counter()
    error = first_error(text)
    assert time.perf_counter() - start < 2  # is_collection_name alone took 5.5 s on it
    assert error.code == "model" and (error.line, error.column) == (2, 10)
    assert f"at most {MAX_MODEL_ID_CHARS}" in error.message and "provider:model" in error.hint


def test_a_long_custom_model_id_is_refused():
    text = ("title: t\nmodels:\n  - {id: 'custom:" + "m" * 300 + "', url: 'https://x.test', modelName: m, "
            "inherit: openai}\n" + PROMPT)
    error = first_error(text)
    assert error.code == "custom-model" and "'id' is 307 characters long" in error.message and error.line == 3


MODEL_TEXT = st.text(alphabet=" \t\u00a0:aA1_-/.", max_size=12)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(MODEL_TEXT)
def test_the_linear_model_entry_reading_agrees_with_model_ids(entry):
    assert _normalize_model_entry(entry) == normalize_model_entry(entry)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.one_of(MODEL_TEXT, st.text(alphabet="AZ09_-x:é", max_size=10), st.none(), st.integers()))
def test_the_linear_collection_check_agrees_with_model_ids(value):
    assert is_collection(value) == is_collection_name(value)


# --- 3. wrong types where text was expected -------------------------------------------------


JUDGES = "models: [openai:x]\nevaluationConfig:\n  llm-coverage:\n    judges:\n      - {model: openai:x, id: %s}\n"


@pytest.mark.parametrize("value, words", [("[a, b]", "not a list"), ("{a: b}", "not a mapping"),
                                          ("true", "not true/false")])
def test_a_judge_id_that_is_not_text_is_a_located_error(value, words):
    result = parse_any(JUDGES % value + PROMPT)
    [error] = result.errors
    assert error.code == "judge" and f"a judge's `id` must be text, {words}" in error.message
    assert (error.line, error.column) == (5, 31) and error.path == "evaluationConfig.llm-coverage.judges[0].id"
    assert "leave `id` out" in error.hint


def test_a_judge_id_that_is_a_number_is_read_as_text():
    result = parse_any(JUDGES % "7" + PROMPT)
    assert result.ok and result.blueprint.coverage.judges[0].id == "7"


CALL = "models: [openai:x]\n---\n- prompt: hi\n  should:\n    - $call: {url: %s}\n"


@pytest.mark.parametrize("url", ["'http:/host'", "'https://:80/x'", "http", "'ftp://host/x'", "'http://[::1/'",
                                 "'http://host:port/'"])
def test_a_call_url_that_is_not_an_address_is_a_located_error(url):
    result = parse_any(CALL % url)
    [error] = result.errors
    assert error.code == "call-url" and "is not an http:// or https:// address with a host" in error.message
    assert (error.line, error.column) == (5, 20) and error.path.endswith("$call.url")


def test_a_call_url_that_is_a_list_is_a_located_error():
    [error] = parse_any(CALL % "[a]").errors
    assert error.code == "call-url" and "must be text" in error.message and (error.line, error.column) == (5, 20)


def test_a_call_host_is_allowed_with_its_port_and_in_any_case():
    text = CALL % "'HTTPS://Scores.Test:8443/x'"
    assert not [w for w in parse_blueprint(text, call_hosts=["scores.test:8443"]).warnings if w.code == "call-host"]
    assert [w for w in parse_blueprint(text, call_hosts=["other.test"]).warnings if w.code == "call-host"]


def _base() -> dict:
    return {
        "title": "t", "description": "d", "author": {"name": "a", "url": "https://x.test"},
        "models": ["openai:gpt-4o-mini", {"id": "custom:m", "url": "https://m.test/v1", "modelName": "m",
                                          "inherit": "openai", "headers": {"X": "y"},
                                          "parameters": {"max_tokens": 10}, "parameterMapping": {"a": "b"}}],
        "references": [{"title": "r", "url": "https://r.test"}],
        "evaluationConfig": {"llm-coverage": {"judges": [{"id": "j", "model": "openai:gpt-4o-mini",
                                                          "approach": "holistic"}], "useExperimentalScale": False}},
        "toolUse": {"enabled": True, "mode": "trace-only", "maxSteps": 3, "outputFormat": "json-line"},
        "tools": [{"name": "search", "description": "d", "schema": {"type": "object"}}],
        "externalServices": {"svc": {"url": "https://svc.test", "method": "POST", "timeout_ms": 100}},
        "point_defs": {"d1": "return 1", "d2": {"text": "x"}},
        "prompts": [
            {"id": "p1", "prompt": "hi", "should": [
                "says hi", {"text": "x", "weight": 2, "citation": "c"}, {"$contains": "x"}, {"$ref": "d1"},
                {"fn": "contains", "fnArgs": "x"}, {"$call": {"url": "https://svc.test/x"}},
                {"$call": {"service": "svc"}}]},
            {"id": "p2", "messages": [{"user": "hi"}, {"role": "assistant", "content": "yo"}, {"user": "ok"}],
             "should_not": ["bad"]},
        ],
    }


def _slots() -> list[tuple]:
    """Every place a value stands in the base blueprint above, as a path of keys."""
    out = [(k,) for k in sorted(HEADER_KEYS) if k != "prompts"]
    out += [("author", k) for k in ("name", "url", "image_url")]
    out += [("models", 1, k) for k in sorted(CUSTOM_MODEL_FIELDS)]
    out += [("models", 0), ("models", 1, "headers", "X"), ("models", 1, "parameters", "max_tokens"),
            ("references", 0), ("references", 0, "title"), ("references", 0, "url"),
            ("evaluationConfig", "llm-coverage"), ("evaluationConfig", "llm-coverage", "judges"),
            ("evaluationConfig", "llm-coverage", "useExperimentalScale"),
            ("evaluationConfig", "llm-coverage", "judges", 0)]
    out += [("evaluationConfig", "llm-coverage", "judges", 0, k) for k in ("id", "model", "approach")]
    out += [("toolUse", k) for k in ("enabled", "mode", "maxSteps", "outputFormat")]
    out += [("tools", 0)] + [("tools", 0, k) for k in ("name", "description", "schema")]
    out += [("externalServices", "svc")] + [("externalServices", "svc", k) for k in ("url", "method", "timeout_ms")]
    out += [("point_defs", "d1"), ("point_defs", "d2"), ("point_defs", "d2", "text")]
    out += [("prompts", i, k) for k in sorted(PROMPT_KEYS) for i in (0, 1)]
    out += [("prompts", 1, "messages", 0), ("prompts", 1, "messages", 0, "user"),
            ("prompts", 1, "messages", 1, "role"), ("prompts", 1, "messages", 1, "content")]
    out += [("prompts", 0, "should", i) for i in range(7)]
    out += [("prompts", 0, "should", i, k) for k in sorted(POINT_OBJECT_KEYS) for i in (1, 2)]
    out += [("prompts", 0, "should", 3, "$ref"), ("prompts", 0, "should", 4, "fn"),
            ("prompts", 0, "should", 4, "fnArgs"), ("prompts", 0, "should", 5, "$call", "url"),
            ("prompts", 0, "should", 6, "$call", "service")]
    from blueprints.spec import functions

    out += [("prompts", 0, "should", 2, "$" + name) for name in sorted(functions.NAMES)]
    return out


SLOTS = _slots()
WRONG = [[1, "a"], {"a": 1}, 3, -1, 1.5, True, False, None, "x" * 3_000, "", "http:/host", [[]], [{}], 10**20]


def _put(doc: dict, path: tuple, value) -> dict:
    holder = doc
    for key in path[:-1]:
        holder = holder[key]
    last = path[-1]
    if isinstance(last, str) and last.startswith("$") and last not in holder:  # swap the point's function
        for key in [k for k in holder if k.startswith("$")]:
            del holder[key]
    holder[last] = value
    return doc


def _never_raises(doc: dict, fmt: str) -> None:
    text = json.dumps(doc) if fmt == "json" else yaml.safe_dump(doc, sort_keys=False, width=10**6)
    result = parse_blueprint(text, fmt=fmt, call_hosts=["svc.test"])  # raises on a bug: no safety net here
    for diagnostic in result.errors:
        assert diagnostic.line and diagnostic.line >= 1 and diagnostic.column >= 1, diagnostic
        assert "internal error" not in diagnostic.message


@pytest.mark.parametrize("value", WRONG, ids=lambda v: type(v).__name__ + (str(len(v)) if isinstance(v, str) else ""))
def test_every_key_takes_a_wrong_typed_value_without_raising(value):
    for path in SLOTS:
        _never_raises(_put(_base(), path, value), "json")


WRONG_VALUES = st.one_of(
    st.sampled_from(WRONG),
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                 lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                 max_leaves=6),
)


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(SLOTS), WRONG_VALUES), min_size=1, max_size=4),
       st.sampled_from(["yaml", "json"]))
def test_wrong_typed_values_anywhere_never_make_the_parser_raise(changes, fmt):
    doc = _base()
    for path, value in changes:
        try:
            _put(doc, path, value)
        except (KeyError, IndexError, TypeError):  # an earlier change replaced what this path goes through
            continue
    _never_raises(doc, fmt)


# --- 4. collections linked out of an imported folder -----------------------------------------


@pytest.mark.django_db
def test_import_refuses_a_collection_file_that_links_outside_the_folder(tmp_path, capsys):
    from django.core.management import call_command

    from blueprints.models import Blueprint, ModelCollection

    outside = tmp_path / "outside" / "SECRET.json"
    outside.parent.mkdir()
    outside.write_text('["openai:secret-model"]')
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "CORE.json").write_text('["openai:gpt-4o-mini"]')
    (repo / "models" / "LEAK.json").symlink_to(outside)
    (repo / "fine.yml").write_text("title: Fine\nmodels: [CORE]\n---\n- prompt: hello\n  should: [hi]\n")
    with pytest.raises(SystemExit) as exit_:
        call_command("import_blueprints", str(repo))
    assert exit_.value.code == 1
    out = capsys.readouterr()
    assert ("models/LEAK.json: refused: 'models/LEAK.json' is a link to a file outside the folder being imported; "
            "copy the file in instead") in out.err
    assert sorted(ModelCollection.objects.values_list("name", flat=True)) == ["CORE"]
    assert list(Blueprint.objects.values_list("slug", flat=True)) == ["fine"]


@pytest.mark.django_db
def test_import_refuses_a_models_folder_that_links_outside(tmp_path, capsys):
    from django.core.management import call_command

    from blueprints.models import ModelCollection

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "CORE.json").write_text('["openai:secret-model"]')
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "models").symlink_to(outside, target_is_directory=True)
    (repo / "fine.yml").write_text("title: Fine\nmodels: [openai:x]\n---\n- prompt: hello\n  should: [hi]\n")
    with pytest.raises(SystemExit):
        call_command("import_blueprints", str(repo))
    assert "models/CORE.json: refused" in capsys.readouterr().err
    assert not ModelCollection.objects.exists()
