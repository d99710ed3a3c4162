"""AgentV's and AI Eval's suites as their own tools read them (issue 14): where files are found, file blocks,
test folders, v5 files refused with the reason. Fixtures are written here to reproduce each shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from blueprints.spec import detect_dialect, parse_any
from blueprints.spec.companions import collect_companions, search_roots
from blueprints.spec.files import validate_file


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


SUITE = """\
tests:
  - id: t1
    criteria: says hello
    input:
      - role: user
        content:
          - {type: text, value: "Read this:"}
          - {type: file, value: /shared/context.md}
          - {type: file, value: ../notes/brief.md}
    expected_output:
      - {type: file, value: ./snippets/answer.md}
"""


def test_files_are_found_in_the_suite_folder_its_parents_up_to_the_repository_root(tmp_path):
    write(tmp_path, {"repo/.git/HEAD": "ref", "repo/shared/context.md": "the context",
                     "repo/evals/notes/brief.md": "the brief", "repo/evals/suite/snippets/answer.md": "  Hello!  \n",
                     "repo/evals/suite/EVAL.yaml": SUITE, "outside.md": "never read"})
    suite = tmp_path / "repo/evals/suite/EVAL.yaml"
    assert search_roots(suite.parent, tmp_path) == [suite.parent, suite.parent.parent, tmp_path / "repo",
                                                    tmp_path]
    files = collect_companions(suite, suite.read_text(), root=tmp_path)
    assert files == {"shared/context.md": "the context", "../notes/brief.md": "the brief",
                     "snippets/answer.md": "  Hello!  \n"}
    report = validate_file(suite, root=tmp_path)
    assert report.ok, report.result.errors
    prompt = report.result.blueprint.prompts[0]
    content = prompt.messages[0].content
    assert "Read this:" in content and "the context" in content and "the brief" in content
    # Expected output given as a file block is the file's text (trimmed, as AgentV trims it).
    assert prompt.ideal_response == "Hello!"


def test_a_missing_file_block_is_a_warning_and_the_block_is_left_out(tmp_path):
    write(tmp_path, {"EVAL.yaml": SUITE, "snippets/answer.md": "Hi"})
    result = parse_any(SUITE, path=str(tmp_path / "EVAL.yaml"), files={"snippets/answer.md": "Hi"})
    assert not result.errors, result.errors
    missing = [w for w in result.warnings if w.code == "missing-file"]
    assert len(missing) == 2 and "input file 'shared/context.md'" not in missing[0].message
    assert "/shared/context.md" in missing[0].message and "left out" in missing[0].message
    assert missing[0].line == 8 and "whole folder" in missing[0].hint
    assert result.blueprint.prompts[0].messages[0].content == "Read this:"


def test_several_expected_blocks_wrap_files_as_agentv_does():
    text = ("tests:\n  - id: t\n    criteria: c\n    input: hi\n    expected_output:\n"
            "      - {type: text, value: See}\n      - {type: file, value: a.md}\n")
    result = parse_any(text, path="EVAL.yaml", files={"a.md": "A text\n"})
    assert result.blueprint.prompts[0].ideal_response == 'See\n\n<file path="a.md">\nA text\n</file>'


def test_a_test_folder_reads_one_case_per_subfolder(tmp_path):
    write(tmp_path, {"EVAL.yaml": "name: d\ntests: ./cases/\n",
                     "cases/b-second/case.yaml": "input: second\ncriteria: c2\n",
                     "cases/a-first/case.yml": "id: named\ninput: first\ncriteria: c1\n",
                     "cases/empty/notes.txt": "no case here"})
    report = validate_file(tmp_path / "EVAL.yaml")
    assert report.ok, report.result.errors
    prompts = report.result.blueprint.prompts
    assert [p.id for p in prompts] == ["named", "b-second"]
    assert prompts[1].messages[0].content == "second"


V5_SHAPES = [
    # a promptfoo-style suite.yaml whose tests are a path
    ('name: basic\nproviders: [llm]\nprompts:\n  - "{{ input }}"\ntests: ./cases.jsonl\n', "`providers:`"),
    ('prompts:\n  - "{{ input }}"\ntests: ./cases.jsonl\n', "`prompts:` as template text"),
    # no `prompts` at all: providers, assert-set, llm-rubric
    ("description: x\nproviders:\n  - id: cli\n    command: node run.mjs\n", "`providers:`"),
    ("tests:\n  - id: a\n    input: hi\n    assert:\n      - type: assert-set\n        assert:\n"
     "          - {type: llm-rubric, value: kind}\n", "`assert-set`"),
    ("tests:\n  - id: a\n    input: hi\n    assert:\n      - {type: llm-rubric, value: kind}\n", "`llm-rubric`"),
    ("tests:\n  - id: a\n    input: hi\n    assert:\n      - {type: 'trajectory:tool-used', value: x}\n",
     "`trajectory:tool-used`"),
    ("- id: fizzbuzz\n  vars:\n    input: Write FizzBuzz\n", "test rows with `vars:`"),
]


@pytest.mark.parametrize(("text", "reason"), V5_SHAPES)
def test_agentv_v5_files_are_refused_with_the_reason(text, reason):
    assert detect_dialect(text) == "agentv-v5"
    result = parse_any(text, path="suite.yaml")
    assert result.blueprint is None and len(result.errors) == 1
    message = result.errors[0].message
    assert "AgentV's v5 format" in message and reason in message


def test_a_weval_blueprint_with_a_stray_providers_key_stays_a_blueprint():
    text = "providers: [x]\nprompts:\n  - prompt: hi\n    should: [polite]\n"
    assert detect_dialect(text) == "weval"
    result = parse_any(text, path="b.yml")
    assert any("providers" in w.message for w in result.warnings)


# --- AI Eval: what its Validate refuses is refused here too, at the place -------------------------------------

AIEVAL_PROMPT = "name: p\ntemplate: Say {{.x}}\n"


def aieval(case_yaml: str, header: str = "suite: s\nprompt: p\n"):
    text = header + "cases:\n  - id: c1\n    input: {x: hi}\n" + case_yaml
    return parse_any(text, path="tests/s.yaml", files={"../prompts/p.yaml": AIEVAL_PROMPT})


@pytest.mark.parametrize(("case_yaml", "words", "line"), [
    ("    expected: {contains: ['hello', '   ']}\n", "`contains[1]` is empty", 6),
    ("    expected: {not_contains: ['']}\n", "`not_contains[0]` is empty", 6),
    ("    expected:\n      tool_calls: [{name: '  '}]\n", "needs `name`", 7),
    ("    tool_mocks: [{name: ' ', response: ok}]\n    expected: {contains: [a]}\n", "tool mock needs a `name`", 6),
    ("    max_steps: -1\n    expected: {contains: [a]}\n", "`max_steps` must be", 6),
    ("    evaluators: [{type: contains, score_threshold: -0.5}]\n    expected: {contains: [a]}\n",
     "`score_threshold` must be", 6),
    ("    evaluators: [{type: llm_judge, criteria: kind, score_scale: -3}]\n", "`score_scale` must be", 6),
    ("    evaluators: [{type: bias, categories: [gender, ' ']}]\n", "`categories[1]` is empty", 6),
    ("    evaluators: [{type: precision, context: some context}]\n", "needs `question`", 6),
    ("    evaluators: [{score_threshold: 0.5}]\n", "needs `type`", 6),
])
def test_aieval_refuses_what_its_validate_refuses(case_yaml, words, line):
    result = aieval(case_yaml)
    assert result.errors, f"accepted: {case_yaml}"
    error = next(e for e in result.errors if words in e.message)
    assert error.line == line and error.hint


def test_an_aieval_suite_without_suite_is_refused_as_aieval_refuses_it():
    result = aieval("    expected: {contains: [a]}\n", header="prompt: p\n")
    assert result.dialect == "aieval"
    assert [e.message for e in result.errors] == ["`suite` (the suite's name) is required"]


def test_a_valid_aieval_case_still_reads():
    result = aieval("    max_steps: 0\n    evaluators: [{type: llm_judge, criteria: kind, score_scale: 0}]\n"
                    "    expected: {contains: [hi]}\n")
    assert not result.errors, result.errors


# --- Weval: prompt ids of prompts without `id`, as the upstream's parser hashes them ---------------------------

@pytest.mark.parametrize(("text", "expected"), [
    # The upstream drops a prompt's own `tags` and keeps `imatch` as written (vectors computed with the
    # upstream's recipe: json-stable-stringify of its normalised prompt, SHA-256, 12 hex digits).
    ('- prompt: Say hi\n  tags: [Greeting]\n  should: [{$imatch: "^hi"}]\n', "hash-625de34e7c43"),
    ('- prompt: Say hi\n  should: [{$imatch: "^hi"}]\n', "hash-625de34e7c43"),
    # `contain` -> `contains` is the one rewrite its parser makes before hashing.
    ("- prompt: Say hi\n  should: [$contain: hi]\n", "hash-917320ae0c13"),
    ("- prompt: Say hi\n  should: [$contains: hi]\n", "hash-917320ae0c13"),
])
def test_prompt_hash_ids_match_the_upstream(text, expected):
    from blueprints.spec import parse_blueprint

    result = parse_blueprint(text)
    assert not result.errors
    prompt = result.blueprint.prompts[0]
    assert prompt.id == expected
    # The point itself is the canonical function (scored the same); tags stay on the prompt.
    assert prompt.points[0].fn in ("imatches", "contains")


def test_agentv4_target_objects_name_the_target_they_use():
    text = ("execution:\n  targets:\n    - name: with-hooks\n      use_target: openai:gpt-4o\n"
            "      hooks: {before_each: ./setup.sh}\n    - local-agent\n"
            "tests:\n  - id: a\n    input: hi\n    criteria: says hi\n")
    result = parse_any(text, path="EVAL.yaml")
    assert not result.errors, result.errors
    assert result.blueprint.models == ["openai:gpt-4o"]
    assert result.extras["targets"] == ["local-agent"]
    assert result.extras["target_options"] == {"with-hooks": {"hooks": {"before_each": "./setup.sh"}}}
    broken = parse_any("execution:\n  targets:\n    - hooks: {before_each: ./setup.sh}\n"
                       "tests:\n  - id: a\n    input: hi\n    criteria: says hi\n", path="EVAL.yaml")
    assert any("target object needs" in e.message for e in broken.errors)
