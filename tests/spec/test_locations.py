"""Every kind of problem names the exact line and column, in block YAML, flow YAML and JSON.

The expected positions are counted by hand from the texts below (1-based).
"""

import pytest

from blueprints.spec.parse import parse_blueprint

BLOCK = """\
title: Locations
models: [openai:gpt-4o-mini]
---
- id: p1
  prompt: Hello
  shoud:
    - forgotten
  should:
    - $contians: foo
    - $word_count_between: 5
    - text: heavy
      weight: 20
    - $ref: nowhere
- id: p2
  messages:
    - user: Hi
    - robot: Hello
  render_as: markdwn
"""

FLOW = """\
title: Locations
models: [openai:gpt-4o-mini]
---
- {id: p1, prompt: Hello, shoud: [x], should: [{$contians: foo}, {$word_count_between: 5}, {text: heavy, weight: 20}]}
- {id: p2, messages: [{user: Hi}, {robot: Hello}], render_as: markdwn}
"""

JSON = """\
{
  "title": "Locations",
  "models": ["openai:gpt-4o-mini"],
  "prompts": [
    {"id": "p1", "prompt": "Hello", "shoud": ["x"],
     "should": [{"$contians": "foo"}, {"$word_count_between": 5}, {"text": "heavy", "weight": 20}]},
    {"id": "p2", "messages": [{"user": "Hi"}, {"robot": "Hello"}], "render_as": "markdwn"}
  ]
}
"""


def _find(result, fragment):
    found = [d for d in result.errors + result.warnings if fragment in d.message]
    assert found, f"no problem mentioning {fragment!r} in {[d.message for d in result.errors + result.warnings]}"
    return found[0]


CASES = [
    # (source, fmt, fragment of the message, line, column, path)
    (BLOCK, "yaml", "unknown key `shoud`", 6, 3, "prompts[0].shoud"),
    (BLOCK, "yaml", "Unknown point function: 'contians'", 9, 7, "prompts[0].should[0].$contians"),
    (BLOCK, "yaml", "word_count_between", 10, 28, "prompts[0].should[1].$word_count_between"),
    (BLOCK, "yaml", "Point multiplier must be a number between 0.1 and 10", 12, 15, "prompts[0].should[2].weight"),
    (BLOCK, "yaml", "Undefined definition 'nowhere'", 13, 13, "prompts[0].should[3].$ref"),
    (BLOCK, "yaml", "Invalid role 'robot'", 17, 7, "prompts[1].messages[1].robot"),
    (BLOCK, "yaml", "Invalid 'render_as' value on prompt 'p2'", 18, 14, "prompts[1].render_as"),
    (FLOW, "yaml", "unknown key `shoud`", 4, 27, "prompts[0].shoud"),
    (FLOW, "yaml", "Unknown point function: 'contians'", 4, 49, "prompts[0].should[0].$contians"),
    (FLOW, "yaml", "word_count_between", 4, 88, "prompts[0].should[1].$word_count_between"),
    (FLOW, "yaml", "Point multiplier must be a number between 0.1 and 10", 4, 114, "prompts[0].should[2].weight"),
    (FLOW, "yaml", "Invalid role 'robot'", 5, 36, "prompts[1].messages[1].robot"),
    (FLOW, "yaml", "Invalid 'render_as' value on prompt 'p2'", 5, 63, "prompts[1].render_as"),
    (JSON, "json", "unknown key `shoud`", 5, 37, "prompts[0].shoud"),
    (JSON, "json", "Unknown point function: 'contians'", 6, 18, "prompts[0].should[0].$contians"),
    (JSON, "json", "word_count_between", 6, 63, "prompts[0].should[1].$word_count_between"),
    (JSON, "json", "Point multiplier must be a number between 0.1 and 10", 6, 95, "prompts[0].should[2].weight"),
    (JSON, "json", "Invalid role 'robot'", 7, 48, "prompts[1].messages[1].robot"),
    (JSON, "json", "Invalid 'render_as' value on prompt 'p2'", 7, 81, "prompts[1].render_as"),
]


@pytest.mark.parametrize("source, fmt, fragment, line, column, path", CASES)
def test_it_marks_the_line_and_column_of_each_problem(source, fmt, fragment, line, column, path):
    result = parse_blueprint(source, fmt=fmt)
    problem = _find(result, fragment)
    assert (problem.line, problem.column) == (line, column)
    assert problem.path == path


def test_every_problem_in_a_file_is_reported_not_just_the_first():
    result = parse_blueprint(BLOCK, fmt="yaml")
    assert len(result.errors) == 6
    assert result.blueprint is None


@pytest.mark.parametrize(
    "text, fmt, line, column, fragment",
    [
        ("title: x\ndescription: Risks: many\n", "yaml", 2, 19, "mapping values are not allowed"),
        ("title: x\nmodels:\n  - a\n - b\n", "yaml", 4, 2, "Failed to parse YAML blueprint"),
        ('{"title": "x",\n "prompts": [}\n', "json", 2, 14, "Failed to parse JSON blueprint"),
        ('{"title": "x",\n}\n', "json", 2, 1, "Failed to parse JSON blueprint"),
    ],
)
def test_it_marks_the_line_of_a_syntax_error(text, fmt, line, column, fragment):
    result = parse_blueprint(text, fmt=fmt)
    (error,) = result.errors
    assert fragment in error.message
    assert (error.line, error.column) == (line, column)


def test_an_unquoted_colon_gets_a_hint_to_quote_the_value():
    result = parse_blueprint("title: x\ndescription: Risks: many\n", fmt="yaml")
    assert "quotes" in result.errors[0].hint


@pytest.mark.parametrize(
    "text, fmt, line, column",
    [
        ("title: a\ntitle: b\n", "yaml", 2, 1),
        ("{title: a, title: b}\n", "yaml", 1, 12),
        ('{"title": "a",\n "title": "b"}', "json", 2, 2),
    ],
)
def test_duplicate_keys_are_errors_at_the_second_key(text, fmt, line, column):
    result = parse_blueprint(text, fmt=fmt)
    (error,) = [d for d in result.errors if "duplicate key" in d.message]
    assert (error.line, error.column) == (line, column)
    assert "line 1" in error.message


def test_a_problem_inside_a_point_definition_is_reported_where_it_is_defined():
    text = """\
point_defs:
  heavy:
    text: counts a lot
    weight: 50
---
- prompt: Hi
  should:
    - $ref: heavy
"""
    result = parse_blueprint(text, fmt="yaml")
    (error,) = result.errors
    assert "Point multiplier" in error.message
    assert (error.line, error.column, error.path) == (4, 13, "point_defs.heavy.weight")


def test_a_quoted_function_call_warning_points_at_the_item():
    text = """\
- prompt: Hi
  should:
    - "$icontains: 'paris'"
"""
    result = parse_blueprint(text, fmt="yaml")
    (warning,) = [w for w in result.warnings if w.code == "quoted-function"]
    assert (warning.line, warning.column) == (3, 7)
    assert result.blueprint.prompts[0].points[0].fn == "icontains"
    assert result.blueprint.prompts[0].points[0].fn_args == "paris"
