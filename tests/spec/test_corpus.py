"""The 173 real blueprints in ../shared/corpus: every valid one parses, every invalid one is explained."""

from pathlib import Path

import pytest

from blueprints.spec.files import iter_blueprint_files, validate_file

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "weval-configs"
FILES = sorted(iter_blueprint_files([CORPUS / "blueprints", CORPUS / "history-json"]))

# The one file that is not valid YAML: an unquoted `: ` inside its description.
INVALID = {"blueprints/eu-ai-act-202401689.yml": (3, 52, "mapping values are not allowed")}


@pytest.fixture(scope="module")
def reports():
    return {str(path.relative_to(CORPUS)): validate_file(path) for path in FILES}


def test_the_corpus_is_all_there():
    assert len(FILES) == 173
    assert not any("models" in path.parts[-2:-1] for path in FILES)


def test_every_valid_file_parses_and_only_the_known_invalid_one_fails(reports):
    failing = {name for name, report in reports.items() if not report.ok}
    assert failing == set(INVALID)


@pytest.mark.parametrize("name, where", INVALID.items())
def test_the_invalid_file_is_explained_with_its_line(reports, name, where):
    (error,) = reports[name].result.errors
    line, column, words = where
    assert (error.line, error.column) == (line, column)
    assert words in error.message and error.hint


def test_the_total_prompt_count_is_stable(reports):
    prompts = sum(len(r.result.blueprint.prompts) for r in reports.values() if r.ok)
    assert prompts == 2526


def test_every_collection_name_in_the_corpus_resolves_from_its_models_folder(reports):
    unresolved = [(n, w.message) for n, r in reports.items() for w in r.result.warnings if w.code == "collection"]
    assert unresolved == []


def test_quoted_function_calls_in_the_corpus_are_read_as_calls(reports):
    quoted = [w for r in reports.values() for w in r.result.warnings if w.code == "quoted-function"]
    assert len(quoted) == 70
    report = reports["blueprints/benchmarks/generative-ai-for-hate-speech-detection-cross-dataset.yml"]
    point = report.result.blueprint.prompts[0].points[0]
    assert (point.fn, point.fn_args) == ("icontains", '"label": "the semantics of the provided text is hateful"')


def test_every_warning_and_error_names_a_line(reports):
    for name, report in reports.items():
        for diag in report.result.errors + report.result.warnings:
            assert diag.line and diag.column, (name, diag)
