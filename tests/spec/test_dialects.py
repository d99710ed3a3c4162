"""Which dialect a text is in, and parse_any's dispatch (the same ParseResult for every dialect)."""

from __future__ import annotations

from pathlib import Path

import pytest

from blueprints.spec import detect_dialect, parse_any, parse_blueprint
from blueprints.spec.companions import collect_companions
from blueprints.spec.files import iter_blueprint_files, validate_file

SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"


@pytest.mark.parametrize(
    ("text", "dialect"),
    [
        ("title: t\nmodels: [openai:x]\n---\n- prompt: hi\n  should: [polite]\n", "weval"),
        ("- prompt: hi\n  should: [polite]\n", "weval"),
        ('{"title": "t", "prompts": [{"prompt": "hi"}]}', "weval"),
        ("title: only a header\n", "weval"),
        ("tests:\n  - id: a\n    input: hi\n    criteria: c\n", "agentv"),
        ("evalcases:\n  - id: a\n    input_messages: [{role: user, content: hi}]\n", "agentv"),
        ("tests: ./cases.jsonl\n", "agentv"),
        ("tests:\n  - file://cases/a.yaml\n", "agentv"),
        ("execution: {targets: [a]}\ntests: []\n", "agentv"),
        ("prompts: [p.txt]\ntests:\n  - vars: {q: 1}\n    assert: [{type: contains, value: x}]\n", "agentv-v5"),
        ("suite: s\nprompt: p\ncases:\n  - id: a\n    input: {x: 1}\n", "aieval"),
        ("name: hello\ntemplate: Hi {{.x}}\n", "aieval-prompt"),
        ("- id: a\n  input: hi\n  criteria: c\n", "agentv-tests"),
        ("not: [valid", "weval"),  # text that does not load goes to the blueprint parser for its syntax error
    ],
)
def test_detect_dialect(text, dialect):
    assert detect_dialect(text) == dialect


def test_weval_text_reads_exactly_as_before():
    text = "title: t\nmodels: [openai:x]\n---\n- id: a\n  prompt: hi\n  should: [polite, $contains: hi]\n"
    ours, theirs = parse_any(text), parse_blueprint(text)
    assert ours.dialect == "weval" and ours.import_report is None
    assert ours.blueprint.model_dump() == theirs.blueprint.model_dump()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("prompts: [p.txt]\ntests:\n  - vars: {q: 1}\n", "AgentV's v5 format"),
        ("name: hello\ntemplate: Hi\n", "AI Eval prompt file"),
        ("- id: a\n  input: hi\n", "file of AgentV test rows"),
    ],
)
def test_what_is_not_a_suite_is_refused_with_the_reason_and_a_fix(text, message):
    result = parse_any(text)
    assert not result.ok and message in result.errors[0].message
    assert result.errors[0].hint and (result.errors[0].line, result.errors[0].column) == (1, 1)


def test_a_folder_walk_skips_companion_files_but_an_explicit_one_is_explained():
    project = SEEDS / "003" / "project"
    walked = {p.relative_to(project).as_posix() for p in iter_blueprint_files([project])}
    assert "tests/hello-tests.yaml" in walked and not any(p.startswith("prompts/") for p in walked)
    report = validate_file(project / "prompts" / "hello.yaml")
    assert not report.ok and "AI Eval prompt file" in report.result.errors[0].message


def test_companions_are_read_from_beside_the_suite_and_never_from_outside_the_root():
    suite = SEEDS / "002" / "complete" / "EVAL.yaml"
    files = collect_companions(suite, suite.read_text())
    assert set(files) == {"judges/safety.md", "judges/regulatory-accuracy.md", "scripts/verify-entity-match.ts",
                          "scripts/check-risk-factors.ts"}
    hello = SEEDS / "003" / "project" / "tests" / "hello-tests.yaml"
    assert set(collect_companions(hello, hello.read_text())) == {"../prompts/hello.yaml"}
    # With the suite's own folder as the root, the prompts folder above it is out of reach.
    assert collect_companions(hello, hello.read_text(), root=hello.parent) == {}
    jsonl = SEEDS / "002" / "external-jsonl" / "EVAL.yaml"
    assert set(collect_companions(jsonl, jsonl.read_text())) == {"datasets/screening-cases.jsonl"}


def test_a_suite_with_a_syntax_error_reports_it_like_a_blueprint():
    result = parse_any("tests:\n  - id: a\n    input: [unclosed\n", path="EVAL.yaml")
    assert not result.ok and result.errors[0].message.startswith("Failed to parse YAML blueprint")
