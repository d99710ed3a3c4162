"""The blueprint page's helpers: the editor's diffs and markdown, how points are labelled, the plan and its
prices, and the example blueprints."""

import json

import pytest

from runs.engine.providers import prices as engine_prices

from blueprints import editing
from blueprints import importing
from blueprints import preview as previews
from blueprints import trying
from blueprints.spec import parse_blueprint
from tests.web.conftest import VALID


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("a\nb\nc\n", "a\nB\nc\n", [("same", 1, 1, "a"), ("del", 2, None, "b"), ("add", None, 2, "B"),
                                ("same", 3, 3, "c")]),
    ("a\n", "a\n", []),
    ("", "x\n", [("add", None, 1, "x")]),
])
def test_diff_rows_carry_both_line_numbers(old, new, expected):
    rows = editing.diff_rows(old, new)

    assert [(r.kind, r.old, r.new, r.text) for r in rows] == expected


def test_a_long_unchanged_stretch_folds_into_a_gap():
    old = "\n".join(str(i) for i in range(1, 30))
    new = old.replace("\n15\n", "\nfifteen\n")

    rows = editing.diff_rows(old, new, context=2)

    assert rows[0].kind == "gap" and rows[0].old == 13
    assert [r.kind for r in rows].count("same") == 4


@pytest.mark.parametrize(("text", "present", "absent"), [
    ("**bold** and `code`", "<strong>bold</strong>", "**"),
    ("<img src=x onerror=alert(1)>", "&lt;img", "<img"),
    ("[x](javascript:alert(1))", "[x](javascript:alert(1))", "href"),
    ("[site](https://example.org)", 'href="https://example.org"', "javascript"),
    ("| a |\n|:-:|\n| 1 |", "<table>", "<script"),
])
def test_markdown_escapes_html_and_unsafe_links(text, present, absent):
    html = editing.render_markdown(text)

    assert present in html
    assert absent not in html


@pytest.mark.parametrize(("yaml_point", "label"), [
    ("$contains: foo", 'contains("foo")'),
    ("$word_count_between: [3, 20]", "word_count_between(3, 20)"),
    ("$is_json", "is_json()"),
    ('$js: "return r.length > 3"', "js(return r.length > 3)"),
    ("Explains it kindly.", "Explains it kindly."),
])
def test_points_are_labelled_as_calls_or_text(yaml_point, label):
    text = VALID.replace("    - $icontains: paris\n", f"    - {yaml_point}\n")
    point = parse_blueprint(text).blueprint.prompts[0].points[0]

    assert previews.point_label(point) == label


MULTI = """\
title: Plan
models:
  - openai:gpt-4o-mini
  - local:thing
  - fixtures:canned
temperatures: [0, 1]
systems: [null, "Be brief."]
evaluationConfig:
  llm-coverage:
    judges:
      - model: openai:gpt-4o-mini
---
- id: two-turns
  messages:
    - user: "12345678"
    - assistant: null
    - user: again
  should:
    - Says something.
    - $contains: x
- id: authored-answer
  messages:
    - user: hi
    - assistant: hello
  should:
    - $contains: hello
"""


def test_the_plan_counts_variants_generations_and_judge_calls(tmp_path):
    preview = previews.build_preview(parse_blueprint(MULTI).blueprint, None)

    assert preview.variant_count == 3 * 2 * 2
    assert "local:thing[temp:1][sp_idx:1]" in preview.variants
    # two-turns: 2 generations per variant; authored-answer ends with the assistant: nothing generated.
    assert preview.generation_calls == 2 * 12
    # one judged point per response of two-turns, one judge.
    assert preview.judge_calls == 12
    assert [p.generations for p in preview.prompts] == [2, 0]


def test_prices_give_a_cost_and_a_missing_price_makes_it_unknown(tmp_path, monkeypatch):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"openai:gpt-4o-mini": {"input": 1.0, "output": 2.0}}}))
    monkeypatch.setattr(engine_prices, "PRICES_FILE", prices)
    text = MULTI.replace("  - local:thing\n", "")

    preview = previews.build_preview(parse_blueprint(text).blueprint, None)

    model = preview.models[0]
    assert model.calls == 2 * 4
    # Each of the 2 calls sees the longest system prompt and the authored turns (9 + 8 + 5 characters: 6 tokens),
    # the second one also the first generated turn (up to 1500 tokens); 4 variants per model.
    assert model.input_tokens == 4 * (6 + (6 + 1500))
    assert model.output_tokens == 8 * 1500
    assert model.cost == pytest.approx((model.input_tokens * 1 + model.output_tokens * 2) / 1e6)
    assert preview.models[1].canned and preview.models[1].cost == 0
    assert preview.cost is not None

    with_unknown = previews.build_preview(parse_blueprint(MULTI).blueprint, None)
    assert with_unknown.cost is None and with_unknown.unpriced == ["local:thing"]


def test_without_a_price_table_every_cost_is_unknown(tmp_path, monkeypatch):
    monkeypatch.setattr(engine_prices, "PRICES_FILE", tmp_path / "absent.json")

    preview = previews.build_preview(parse_blueprint(VALID).blueprint, None)

    assert preview.cost is None and not preview.prices_known


def test_a_custom_models_max_tokens_bounds_its_output_estimate():
    text = VALID.replace("  - openai:gpt-4.1-mini\n", """\
  - id: local:small
    url: http://localhost:1/v1/chat/completions
    modelName: small
    inherit: openai
    parameters: {max_tokens: 100}
""")

    preview = previews.build_preview(parse_blueprint(text).blueprint, None)

    assert preview.models[0].output_tokens == 100


@pytest.mark.parametrize("path", importing.example_files(), ids=lambda p: p.name)
def test_every_example_blueprint_is_valid(path):
    result = parse_blueprint(path.read_text(encoding="utf-8"), path=str(path))

    assert result.errors == []


def test_the_offline_example_needs_no_key_and_its_careful_model_scores_full_marks():
    bp = parse_blueprint((importing.EXAMPLES_DIR / "first-steps-offline.yml").read_text()).blueprint
    assert all(m.startswith("fixtures:") for m in bp.models)
    assert all(p.kind == "function" for prompt in bp.prompts for p in prompt.all_points())

    for prompt in bp.prompts:
        fixture = bp.fixtures["responses"][prompt.id]
        response = "\n\n".join(fixture["turns"]) if "turns" in fixture else fixture["default"]
        outcome = trying.try_response(bp, prompt, response)
        assert outcome.score == 1.0, prompt.id
        assert outcome.skipped is None