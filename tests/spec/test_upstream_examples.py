"""AgentV's own shipped examples (issue 24): every eval file of the `examples/` and `evals/` folders of
github.com/EntityProcess/agentv at v2.18.3 and v4.42.4, with the files they name, validates as AgentV accepts it,
except the features docs/importing.md names as unsupported (the table below); no file, suite or companion, makes
the validation raise or report an internal error. The copies and how they were trimmed: the README beside them."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command

from blueprints.spec.files import iter_blueprint_files, validate_file

UPSTREAM = Path(__file__).resolve().parents[1] / "fixtures" / "upstream" / "agentv"
TAGS = ("v2.18.3", "v4.42.4")

# Eval files AgentV accepts that evalsite refuses, with the reason (docs/importing.md names each feature) and words
# the refusal must contain. Once a feature is read, its entry must go: the test below fails while it stays.
KNOWN_UNSUPPORTED: dict[tuple[str, str], tuple[str, str]] = {}
# Eval files whose names do not say so (AgentV runs any YAML file it is given).
OTHER_EVAL_FILES = {
    ("v2.18.3", "examples/showcase/tool-evaluation-plugins/tool-eval-demo.yaml"),
    ("v4.42.4", "evals/agentic-engineering/workspace-template/evals/deploy-auto/deploy-plan.yaml"),
}


def kept_files(tag: str) -> list[str]:
    root = UPSTREAM / tag
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def is_eval_file(tag: str, relative: str) -> bool:
    name = relative.rsplit("/", 1)[-1].lower()
    return name in ("eval.yaml", "eval.yml") or name.endswith((".eval.yaml", ".eval.yml")) or \
        (tag, relative) in OTHER_EVAL_FILES


ALL = [(tag, rel) for tag in TAGS for rel in kept_files(tag)]
EVALS = [(tag, rel) for tag, rel in ALL if is_eval_file(tag, rel)]


def test_both_trees_are_kept():
    counts = {tag: sum(1 for t, _ in EVALS if t == tag) for tag in TAGS}
    assert counts["v2.18.3"] >= 55 and counts["v4.42.4"] >= 110, counts


@pytest.mark.parametrize("tag,relative", ALL, ids=[f"{t}:{r}" for t, r in ALL])
def test_no_kept_file_makes_the_validation_fail_inside(tag, relative):
    """Suites, their test files, prompts, data and script placeholders alike: a result, never an exception."""
    report = validate_file(UPSTREAM / tag / relative, root=UPSTREAM / tag)
    internal = [d for d in report.result.diagnostics if d.code == "internal"]
    assert not internal, internal


@pytest.mark.parametrize("tag,relative", EVALS, ids=[f"{t}:{r}" for t, r in EVALS])
def test_every_eval_file_agentv_accepts_validates(tag, relative):
    report = validate_file(UPSTREAM / tag / relative, root=UPSTREAM / tag)
    known = KNOWN_UNSUPPORTED.get((tag, relative))
    if known is None:
        assert report.result.dialect == "agentv"
        assert not report.result.errors, [d.format(relative) for d in report.result.errors]
        assert report.result.blueprint.prompts
    else:
        reason, words = known
        assert report.result.errors, f"{relative} is read now ({reason}): remove it from KNOWN_UNSUPPORTED"
        assert any(words in d.message for d in report.result.errors), [d.message for d in report.result.errors]


def test_the_table_of_unsupported_files_names_kept_eval_files():
    for tag, relative in KNOWN_UNSUPPORTED:
        assert (tag, relative) in EVALS


def test_the_docs_name_each_unsupported_feature():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "importing.md").read_text()
    for _, relative in KNOWN_UNSUPPORTED:
        assert relative in docs


@pytest.mark.parametrize("tag", TAGS)
def test_validate_blueprint_reads_each_tree_without_a_traceback(tag, monkeypatch):
    """The command as an author runs it, from the tree's top (AgentV's working folder), over the whole tree."""
    monkeypatch.chdir(UPSTREAM / tag)
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("validate_blueprint", "examples", "evals", stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = exc.code
    text = out.getvalue() + err.getvalue()
    assert code == (1 if any(t == tag for t, _ in KNOWN_UNSUPPORTED) else 0), text[-2000:]
    assert "Traceback" not in text and "internal error" not in text
    files = list(iter_blueprint_files(["examples", "evals"]))
    assert f"{len(files):,} files:" in text


def test_plain_text_assertions_alone_score_a_test_without_criteria():
    """v4.42.4 tool-calls-template: each test has only plain-string `assertions` (no `criteria`): AgentV scores it
    with one rubric grader of those strings."""
    relative = "examples/features/tool-calls-template/evals/eval.yaml"
    report = validate_file(UPSTREAM / "v4.42.4" / relative, root=UPSTREAM / "v4.42.4")
    assert report.ok, report.result.errors
    prompts = report.result.blueprint.prompts
    assert [len(p.points) for p in prompts] == [1, 1, 1]
    assert prompts[0].points[0].text == "The agent invoked the acme-deploy skill"


def test_a_code_graders_own_settings_reach_its_script_as_config():
    """document-extraction: a code grader's `fields` (and any key AgentV does not know) is passed on as `config`."""
    relative = "examples/features/document-extraction/evals/confusion-metrics.eval.yaml"
    report = validate_file(UPSTREAM / "v4.42.4" / relative, root=UPSTREAM / "v4.42.4")
    assert report.ok, report.result.errors
    assert not [w for w in report.result.warnings if w.code == "unknown-key"]
    args = [p.fn_args for p in report.result.blueprint.prompts[0].points if p.fn == "code_judge"]
    assert args and "fields" in args[0]["config"]


def test_a_rubric_operator_is_stated_in_the_judged_point():
    """v4.42.4 rubric/operators: `operator: contradiction` asks only that the answer not contradict the outcome."""
    relative = "examples/features/rubric/evals/operators.eval.yaml"
    report = validate_file(UPSTREAM / "v4.42.4" / relative, root=UPSTREAM / "v4.42.4")
    assert report.ok, report.result.errors
    assert not [w for w in report.result.warnings if w.code == "unknown-key"]
    texts = [p.text for p in report.result.blueprint.prompts[0].points]
    assert texts[0] == "States Q4 revenue increased to $10M from $8M."
    assert texts[1].startswith("The response makes no claim that contradicts") and "42% from 45%" in texts[1]


def test_per_test_vars_fill_the_placeholders_as_agentv_4_does():
    """v4.42.4 test-vars-templating: each test's `vars` fill `{{ name }}` and `{{ a.b }}` in its criteria, input and
    expected output, and in the suite's input prepended to it."""
    relative = "examples/features/test-vars-templating/evals/dataset.eval.yaml"
    report = validate_file(UPSTREAM / "v4.42.4" / relative, root=UPSTREAM / "v4.42.4")
    assert report.ok and report.result.dialect == "agentv", report.result.errors
    france, ada = report.result.blueprint.prompts
    assert [m.content for m in france.messages] == ["You are a concise assistant answering geography questions.",
                                                    "Question: What is the capital of France?"]
    assert france.ideal_response == "Paris"
    assert france.points[0].text == "Answers What is the capital of France? correctly"
    assert ada.messages[0].content == "You are a concise assistant answering etiquette questions."
    assert ada.messages[1].content == "Say hello to Ada."
    assert ada.ideal_response == "Hello, Ada!" and ada.points[0].text == "Greets Ada warmly"


def test_a_top_level_defaults_is_ignored_with_a_warning_as_agentv_4_does():
    """v4.42.4 autoresearch: `defaults:` holds only a YAML anchor the tests use; AgentV 4 warns and ignores it."""
    relative = "examples/features/autoresearch/EVAL.yaml"
    report = validate_file(UPSTREAM / "v4.42.4" / relative, root=UPSTREAM / "v4.42.4")
    assert report.ok and report.result.dialect == "agentv", report.result.errors
    assert any("`defaults`" in w.message for w in report.result.warnings)
    first = report.result.blueprint.prompts[0]
    assert first.messages[0].role == "system" and first.messages[0].content.startswith("Classify the incident")
