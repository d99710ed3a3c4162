"""The blueprint parser: structures, aliases, messages, points, ids and lints, as tables."""

import json

import pytest

from blueprints.spec.ids import blueprint_id_for_file, blueprint_id_from_path, normalize_tags, stable_stringify
from blueprints.spec.parse import parse_blueprint


def ok(text, fmt="yaml", **kwargs):
    result = parse_blueprint(text, fmt=fmt, **kwargs)
    assert result.ok, [e.format() for e in result.errors]
    return result.blueprint


def codes(result):
    return [d.code for d in result.warnings]


# --- structures -------------------------------------------------------------------------

STRUCTURES = [
    ("header + list", "title: T\n---\n- prompt: a\n- prompt: b\n", "T", ["a", "b"]),
    ("header + several lists", "title: T\n---\n- prompt: a\n---\n- prompt: b\n- prompt: c\n", "T", ["a", "b", "c"]),
    ("header + one-prompt docs", "title: T\n---\nprompt: a\n---\nprompt: b\n", "T", ["a", "b"]),
    ("stream, no header", "prompt: a\n---\nprompt: b\n", None, ["a", "b"]),
    ("stream led by promptText", "promptText: a\n---\npromptText: b\n", None, ["a", "b"]),
    ("list, no header", "- prompt: a\n- prompt: b\n", None, ["a", "b"]),
    ("prompts key", "title: T\nprompts:\n  - prompt: a\n", "T", ["a"]),
    ("single prompt doc", "prompt: a\nshould: [x]\n", None, ["a"]),
    ("trailing ---", "title: T\n---\n- prompt: a\n---\n", "T", ["a"]),
    ("header only", "title: T\nmodels: [openai:gpt-4o]\n", "T", []),
]


@pytest.mark.parametrize("name, text, title, prompts", STRUCTURES, ids=[s[0] for s in STRUCTURES])
def test_it_reads_every_structure(name, text, title, prompts):
    bp = ok(text)
    assert bp.title == title
    assert [p.messages[0].content for p in bp.prompts] == prompts


def test_a_json_object_with_prompts_and_a_json_list_of_prompts_both_work():
    assert len(ok('{"title": "T", "prompts": [{"promptText": "a"}]}', "json").prompts) == 1
    assert len(ok('[{"promptText": "a"}, {"prompt": "b"}]', "json").prompts) == 2


def test_an_empty_file_is_an_error_with_the_upstream_words():
    result = parse_blueprint("", fmt="yaml")
    assert result.errors[0].message == "YAML blueprint is empty or contains only null documents."


def test_a_document_that_is_a_bare_string_is_an_error():
    result = parse_blueprint("title: T\n---\njust words\n", fmt="yaml")
    assert any("document 2 is text" in e.message for e in result.errors)


# --- header -----------------------------------------------------------------------------

def test_header_aliases_are_normalised():
    bp = ok("configId: old\nconfigTitle: Old title\nsystemPrompt: be brief\ncitation: Some paper\n---\n- prompt: a\n")
    out = bp.to_upstream()
    assert (out["id"], out["title"], out["system"]) == ("old", "Old title", "be brief")
    assert out["references"] == [{"title": "Some paper"}]


def test_tags_are_slugged_except_internal_ones():
    assert normalize_tags(["Human Rights", "_Internal", "law_and order!", "human-rights"]) == \
        ["human-rights", "_Internal", "law-and-order"]


def test_a_system_list_in_the_header_becomes_systems():
    bp = ok("system: [be brief, null]\n---\n- prompt: a\n")
    assert bp.systems == ["be brief", None]


def test_systems_in_the_header_forbid_a_prompt_level_system():
    result = parse_blueprint("systems: [a, b]\n---\n- id: p\n  prompt: x\n  system: c\n", fmt="yaml")
    assert "individual prompts (like 'p') cannot have their own 'system' override" in result.errors[0].message


@pytest.mark.parametrize(
    "header, message",
    [
        ("temperature: hot", "Config file has invalid 'temperature'"),
        ("temperatures: [0, warm]", "Config file has invalid 'temperatures'"),
        ("tags: science", "Config file has an invalid 'tags' field"),
        ("systems: [null, null]", "at most one 'null' entry"),
        ("models: openai:gpt-4o", "The 'models' field must be an array"),
        ("author: {url: x}", "Invalid 'author' object: missing 'name' string."),
        ("render_as: pdf", "Invalid global 'render_as' value."),
        ("externalServices: {svc: {method: GET}}", "External service 'svc' must have a 'url' field"),
        ("externalServices: {svc: {url: 'nope'}}", "External service 'svc' has invalid URL"),
        ("models: [{id: x, url: 'http://h/v1', modelName: m}]", "'inherit' is required and must be a string."),
        ("models: [{id: x, url: 'http://h', modelName: m, inherit: openai, format: rpc}]",
         "'format' must be either 'chat' or 'completions'"),
        ("evaluationConfig: {llm-coverage: {judges: [{model: openai:gpt-4o, approach: lenient}]}}",
         "judge approach must be one of"),
    ],
)
def test_header_errors_use_plain_words(header, message):
    result = parse_blueprint(header + "\n---\n- prompt: a\n", fmt="yaml")
    assert any(message in e.message for e in result.errors), [e.message for e in result.errors]


def test_models_are_normalised_and_deduplicated_with_warnings():
    result = parse_blueprint("models:\n  - 'openai : gpt-4o'\n  - {anthropic: claude-3-5-haiku}\n  - openai:gpt-4o\n"
                             "---\n- prompt: a\n", fmt="yaml")
    assert result.blueprint.models == ["openai:gpt-4o", "anthropic:claude-3-5-haiku"]
    assert codes(result).count("model") == 3


def test_a_custom_model_object_is_kept_with_all_its_fields():
    bp = ok("""\
models:
  - id: local:llama
    url: http://127.0.0.1:11434/v1/chat/completions
    modelName: llama3
    inherit: openai
    format: chat
    headers: {Authorization: 'Bearer ${OLLAMA_KEY}'}
    parameters: {stream: null, max_tokens: 100}
    parameterMapping: {maxTokens: token_limit}
    reasoningEffort: low
---
- prompt: a
""")
    (model,) = bp.models
    assert model.model_name == "llama3" and model.parameters == {"stream": None, "max_tokens": 100}
    assert model.to_upstream()["reasoningEffort"] == "low"


def test_judges_and_the_experimental_scale_are_read():
    bp = ok("evaluationConfig:\n  llm-coverage:\n    judges:\n      - {id: j1, model: 'openai:gpt-4o', approach: "
            "prompt-aware}\n    useExperimentalScale: true\n---\n- prompt: a\n")
    assert bp.coverage.use_experimental_scale is True
    assert bp.coverage.judges[0].approach == "prompt-aware"


def test_deprecated_fields_warn():
    result = parse_blueprint("id: x\nevaluationConfig:\n  llm-coverage:\n    judgeMode: consensus\n    judgeModels: [a]"
                             "\n---\n- prompt: a\n", fmt="yaml")
    assert result.ok
    assert codes(result).count("deprecated") == 3


def test_unknown_keys_warn_with_a_suggestion():
    result = parse_blueprint("titel: T\n---\n- prompt: a\n  shoud: [x]\n", fmt="yaml")
    hints = {w.message.split("`")[1]: w.hint for w in result.warnings if w.code == "unknown-key"}
    assert hints == {"titel": "did you mean `title`?", "shoud": "did you mean `should`?"}


# --- prompts and messages ---------------------------------------------------------------

def test_prompt_aliases_are_normalised():
    bp = ok("- id: p\n  promptText: q\n  idealResponse: i\n  reference: r\n  importance: 2\n  expectations: [x]\n")
    out = bp.to_upstream()["prompts"][0]
    assert out["messages"] == [{"role": "user", "content": "q"}]
    assert (out["idealResponse"], out["citation"], out["weight"], out["render_as"]) == ("i", "r", 2.0, "markdown")
    assert out["points"] == [{"text": "x", "multiplier": 1.0}]


def test_messages_shorthand_ai_nulls_and_system_turns():
    bp = ok("""\
- messages:
    - system: be kind
    - user: hi
    - ai: hello
    - user: and?
    - assistant: null
    - role: user
      content: more
""")
    roles = [(m.role, m.content) for m in bp.prompts[0].messages]
    assert roles == [("system", "be kind"), ("user", "hi"), ("assistant", "hello"), ("user", "and?"),
                     ("assistant", None), ("user", "more")]
    assert bp.prompts[0].messages[4].to_generate


def test_a_conversation_may_end_with_an_authored_assistant_turn():
    # Deviation 14: that turn is the response to score.
    bp = ok("- messages:\n    - user: hi\n    - assistant: hello there\n")
    assert bp.prompts[0].messages[-1].content == "hello there"


@pytest.mark.parametrize(
    "messages, message",
    [
        ("[{assistant: a}, {user: b}]", "First message role cannot be 'assistant'."),
        ("[{user: a, assistant: b}]", "Each message in the shorthand format must have exactly one key"),
        ("[{human: a}]", "Invalid role 'human' in message at index 0"),
        ("[{user: null}]", "Content cannot be empty."),
        ("[]", "must have either a valid 'promptText' or a non-empty 'messages' array"),
    ],
)
def test_conversation_errors(messages, message):
    result = parse_blueprint(f"- id: p\n  messages: {messages}\n", fmt="yaml")
    assert any(message in e.message for e in result.errors), [e.message for e in result.errors]


def test_consecutive_turns_of_one_role_are_a_warning_that_says_how_they_are_sent():
    result = parse_blueprint("- id: p\n  messages: [{user: a}, {user: b}]\n", fmt="yaml")
    assert result.ok
    (warning,) = [w for w in result.warnings if w.code == "conversation"]
    assert "Two 'user' messages in a row." in warning.message and "sent as written" in warning.message
    assert (warning.line, warning.hint) == (2, "join the two turns, or put `- assistant: null` between them to have "
                                                "the model answer")


def test_a_prompt_weight_out_of_range_is_an_error_with_the_upstream_words():
    result = parse_blueprint("- id: p\n  prompt: a\n  weight: 11\n", fmt="yaml")
    assert result.errors[0].message == "Prompt weight must be a number between 0.1 and 10. Found 11. Prompt ID: 'p'"


# --- points -----------------------------------------------------------------------------

POINTS = """\
- id: p
  prompt: q
  should:
    - judged text
    - "Covers the rule.": "Act of 1940"
    - ? |
        A long criterion
        over two lines.
      : "SEC Rule"
    - $contains: fiduciary
    - $is_json
    - fn: $icontains
      arg: x
      weight: 2
    - point: weighted
      weight: 3
    - {text: cited, citation: {title: Paper, url: 'https://example.org'}}
"""


def test_every_point_form_normalises():
    out = ok(POINTS).to_upstream()["prompts"][0]["points"]
    assert out == [
        {"text": "judged text", "multiplier": 1.0},
        {"text": "Covers the rule.", "citation": "Act of 1940", "multiplier": 1.0},
        {"text": "A long criterion\nover two lines.\n", "citation": "SEC Rule", "multiplier": 1.0},
        {"fn": "contains", "fnArgs": "fiduciary", "multiplier": 1.0},
        {"fn": "is_json", "multiplier": 1.0},
        {"fn": "icontains", "fnArgs": "x", "multiplier": 2.0},
        {"text": "weighted", "multiplier": 3.0},
        {"text": "cited", "citation": {"title": "Paper", "url": "https://example.org"}, "multiplier": 1.0},
    ]


def test_falsy_arguments_are_kept():
    # The upstream loses `arg: 0` and `fnArgs: ""`; we keep what the author wrote.
    out = ok("- prompt: q\n  should:\n    - {fn: contains, fnArgs: ''}\n").to_upstream()["prompts"][0]["points"]
    assert out == [{"fn": "contains", "fnArgs": "", "multiplier": 1.0}]


def test_paths_get_upstream_numbers_and_should_not_paths_their_own():
    bp = ok("""\
- prompt: q
  should:
    - required
    - []
    - - a
      - b
    - - c
      - $contains: d
  should_not:
    - - rude
      - dismissive
""")
    prompt = bp.prompts[0]
    assert [(p.text or p.fn, p.path_id) for p in prompt.all_points()] == [
        ("required", None), ("a", "path_2"), ("b", "path_2"), ("c", "path_3"), ("contains", "path_3"),
        ("rude", "not_path_0"), ("dismissive", "not_path_0"),
    ]
    assert all(p.inverted for p in prompt.should_not[0])


def test_a_block_of_alternative_paths_is_read_one_level_up():
    # Deviation 7: the guide's list-of-lists item.
    bp = ok("- prompt: q\n  should:\n    - English\n    - - - answer\n        - $contains: '42'\n      - - clarify\n"
            "    - last\n")
    assert [(p.text or p.fn, p.path_id) for p in bp.prompts[0].all_points()] == [
        ("English", None), ("answer", "path_1"), ("contains", "path_1"), ("clarify", "path_2"), ("last", None)]


def test_deeper_nesting_inside_a_path_is_an_error():
    result = parse_blueprint("- prompt: q\n  should:\n    - - a\n      - - b\n", fmt="yaml")
    assert result.errors[0].message == "Nested arrays within alternative paths are not supported"


def test_single_point_paths_warn_about_the_common_pitfall():
    result = parse_blueprint("- prompt: q\n  should:\n    - - $contains: Lagos\n    - - $contains: Cairo\n", fmt="yaml")
    assert result.ok and "single-point-path" in codes(result)
    result = parse_blueprint("- prompt: q\n  should:\n    - - a\n      - b\n    - - c\n", fmt="yaml")
    assert "single-point-path" not in codes(result)


def test_legacy_json_tuple_points_are_function_calls():
    # Deviation 8.
    bp = ok('{"prompts": [{"promptText": "q", "points": [["contains", "x"], ["$icontains", "y"], ["a", "b"]]}]}',
            "json")
    out = bp.to_upstream()["prompts"][0]["points"]
    assert out[0] == {"fn": "contains", "fnArgs": "x", "multiplier": 1.0}
    assert out[1] == {"fn": "icontains", "fnArgs": "y", "multiplier": 1.0}
    assert out[2] == [{"text": "a", "multiplier": 1.0}, {"text": "b", "multiplier": 1.0}]


@pytest.mark.parametrize(
    "point, fn, args, code",
    [
        ('"$icontains: \'paris\'"', "icontains", "paris", "quoted-function"),  # deviation 15
        ('"$contains_any_of: [a, b]"', "contains_any_of", ["a", "b"], "quoted-function"),
        ('"$100 is too much"', None, None, "dollar-text"),
        ('"$"', None, None, None),
    ],
)
def test_strings_starting_with_a_dollar(point, fn, args, code):
    result = parse_blueprint(f"- prompt: q\n  should:\n    - {point}\n", fmt="yaml")
    assert result.ok
    (parsed,) = result.blueprint.prompts[0].points
    assert (parsed.fn, parsed.fn_args) == (fn, args)
    point_codes = [c for c in codes(result) if c in ("quoted-function", "dollar-text")]
    assert point_codes == ([code] if code else [])


def test_unknown_functions_are_errors_with_a_suggestion():
    result = parse_blueprint("- prompt: q\n  should:\n    - $contians: x\n    - {fn: icontain_any, arg: [a]}\n",
                             fmt="yaml")
    assert [e.message for e in result.errors] == ["Unknown point function: 'contians'",
                                                  "Unknown point function: 'icontain_any'"]
    assert "did you mean `$contains`?" in result.errors[0].hint


def test_point_errors_use_the_upstream_words():
    result = parse_blueprint("- id: p\n  prompt: q\n  should:\n    - {weight: 2}\n    - 42\n    - {text: a, fn: b}\n",
                             fmt="yaml")
    messages = [e.message for e in result.errors]
    assert messages[0].startswith("Invalid point object in prompt 'p': Point must define 'text', a function")
    assert messages[1] == "Invalid point format in prompt 'p': Point must be a string, array, or object."
    assert messages[2] == "Point cannot have both 'text' and 'fn' defined"


def test_point_defs_expand_with_their_weight_and_the_refs_own_weight_wins():
    bp = ok("""\
point_defs:
  band: "return r.length > 3"
  strict: {fn: contains, fnArgs: x, weight: 2}
  judged: {point: says hello, weight: 3}
---
- prompt: q
  should:
    - $ref: band
    - $ref: strict
    - {$ref: strict, weight: 5}
    - $ref: judged
""")
    out = bp.to_upstream()["prompts"][0]["points"]
    assert out == [
        {"fn": "js", "fnArgs": "return r.length > 3", "multiplier": 1.0},
        {"fn": "contains", "fnArgs": "x", "multiplier": 2.0},
        {"fn": "contains", "fnArgs": "x", "multiplier": 5.0},
        {"text": "says hello", "multiplier": 3.0},
    ]


def test_a_citation_pair_named_like_a_function_warns():
    result = parse_blueprint("- prompt: q\n  should:\n    - contains: fiduciary\n", fmt="yaml")
    assert "citation-or-function" in codes(result)


# --- ids --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "path, expected",
    [
        ("blueprints/subdir/my-test.yml", "subdir__my-test"),
        ("subdir/my-test.yaml", "subdir__my-test"),
        ("a/b/c.civic.yml", "a__b__c"),
        ("x.weval.yaml", "x"),
        ("legacy.json", "legacy"),
    ],
)
def test_blueprint_ids_come_from_paths(path, expected):
    assert blueprint_id_from_path(path) == expected


def test_a_file_id_is_relative_to_the_nearest_blueprints_folder():
    assert blueprint_id_for_file("/repo/blueprints/jp/x.yml") == "jp__x"
    assert blueprint_id_for_file("/tmp/loose.yml") == "loose"


def test_stable_stringify_sorts_keys_and_prints_numbers_like_javascript():
    assert stable_stringify({"b": 1.0, "a": [0.5, None, "é"], "c": None, "content": None}) == \
        '{"a":[0.5,null,"é"],"b":1,"content":null}'


def test_prompts_without_an_id_get_a_stable_hash_id():
    text = "- prompt: What is 2+2?\n  should: [says 4]\n"
    first = ok(text).prompts[0].id
    assert first.startswith("hash-") and len(first) == 17
    assert ok(text).prompts[0].id == first
    assert ok(text.replace("says 4", "says four")).prompts[0].id != first
    expected = json.dumps({"messages": [{"content": "What is 2+2?", "role": "user"}],
                           "points": [{"multiplier": 1, "text": "says 4"}], "render_as": "markdown"},
                          separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    import hashlib
    assert first == "hash-" + hashlib.sha256(expected.encode()).hexdigest()[:12]


def test_hash_ids_match_the_upstreams_own_unit_test():
    # Upstream's test: a prompt with an ideal and no points hashes without a `points` key.
    assert ok('- prompt: "This prompt needs an ID."\n  ideal: "An ideal response."\n').prompts[0].id == \
        "hash-d35001ad5740"


def test_an_explicit_null_argument_is_part_of_the_hash():
    with_null = ok("- prompt: q\n  should:\n    - $is_json: null\n").prompts[0]
    bare = ok("- prompt: q\n  should:\n    - $is_json\n").prompts[0]
    assert '"fnArgs":null' in stable_stringify(with_null.to_upstream(include_id=False))
    assert with_null.id != bare.id


def test_duplicate_prompt_ids_warn():
    result = parse_blueprint("- id: a\n  prompt: x\n- id: a\n  prompt: y\n", fmt="yaml")
    assert result.ok and "duplicate-id" in codes(result)


# --- collections ------------------------------------------------------------------------

def test_unknown_collections_warn_and_known_ones_do_not():
    text = "models: [CORE, openai:gpt-4o]\n---\n- prompt: a\n"
    assert "collection" in codes(parse_blueprint(text, fmt="yaml"))
    known = parse_blueprint(text, fmt="yaml", collections=lambda name: ["openai:gpt-4o-mini"])
    assert "collection" not in codes(known)


def test_collections_resolve_from_a_models_folder_above_the_file(tmp_path):
    from blueprints.spec.files import validate_file

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "CORE.json").write_text('["openai:gpt-4o", "anthropic:claude-3-5-haiku"]')
    (tmp_path / "blueprints" / "sub").mkdir(parents=True)
    path = tmp_path / "blueprints" / "sub" / "b.yml"
    path.write_text("models: [CORE, openai:gpt-4o, mistral:large]\n---\n- prompt: a\n")
    report = validate_file(path)
    assert report.ok and "collection" not in codes(report.result)
    assert report.model_count == 3
    assert report.result.blueprint.derived_id == "sub__b"
