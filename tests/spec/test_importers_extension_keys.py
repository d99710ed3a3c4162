"""The extension keys that bring verdicts, gates, minimums, bands and trials to Weval blueprints."""

from __future__ import annotations

import pytest

from blueprints.spec import parse_blueprint

HEADER = "title: t\nmodels: [openai:x]\n"


def parse(text):
    return parse_blueprint(HEADER + text, fmt="yaml")


def test_header_defaults_reach_every_prompt_and_a_prompt_overrides_them():
    result = parse("threshold: 0.7\ntrials: 3\ntrial_aggregation: best\n---\n- id: a\n  prompt: hi\n  should: [x]\n"
                   "- id: b\n  prompt: ho\n  verdicts: {pass: 0.9, borderline: 0.5}\n  trials: 1\n  should: [y]\n")
    assert result.ok, [e.format() for e in result.errors]
    a, b = result.blueprint.prompts
    assert (a.verdicts.pass_at, a.verdicts.borderline_at, a.trials, a.trial_aggregation) == (0.7, None, 3, "best")
    assert (b.verdicts.pass_at, b.verdicts.borderline_at, b.trials, b.trial_aggregation) == (0.9, 0.5, 1, "best")
    assert a.has_verdicts and result.blueprint.trials == 3


def test_points_with_required_and_min_score():
    result = parse("verdicts: {pass: 0.9}\n---\n- id: a\n  prompt: hi\n  should:\n    - $contains: x\n"
                   "      required: true\n    - text: polite\n      min_score: 0.5\n    - text: kind\n"
                   "      required: 0.6\n")
    assert result.ok, [e.format() for e in result.errors]
    prompt = result.blueprint.prompts[0]
    gated, minimum, custom = prompt.points
    assert prompt.check(gated.check_id).gate == 0.9  # true: the pass mark of the verdicts
    assert minimum.check_id is None and minimum.min_score == 0.5
    assert prompt.check(custom.check_id).gate == 0.6


def test_nothing_changes_without_them():
    prompt = parse("---\n- prompt: hi\n  should: [x]\n").blueprint.prompts[0]
    assert (prompt.verdicts, prompt.checks, prompt.trials, prompt.has_verdicts) == (None, [], None, False)


def test_a_point_def_with_a_gate_gives_each_prompt_its_own_check():
    result = parse("point_defs:\n  denied: {fn: contains, arg: DENIED, required: true}\n---\n"
                   "- id: a\n  prompt: hi\n  should: [{$ref: denied}]\n- id: b\n  prompt: ho\n  should: [{$ref: denied}]\n")
    assert result.ok, [e.format() for e in result.errors]
    for prompt in result.blueprint.prompts:
        assert len(prompt.checks) == 1 and prompt.points[0].check_id == prompt.checks[0].id


@pytest.mark.parametrize(
    ("text", "line", "column", "words"),
    [
        ("threshold: 1.5\n", 3, 12, ["`threshold` must be a number from 0 to 1"]),
        ("threshold: 0.5\nverdicts: {pass: 0.8}\n", 4, 1, ["`threshold` and `verdicts` both given"]),
        ("verdicts: {pass: 0.5, borderline: 0.7}\n", 3, 35, ["borderline mark (0.7) is above the pass mark"]),
        ("trials: 0\n", 3, 9, ["`trials` must be a whole number from 1 to 100"]),
        ("trial_aggregation: median\n", 3, 20, ["must be one of mean, best, pass_at_k"]),
        ("---\n- prompt: hi\n  should:\n    - $contains: x\n      required: yes please\n", 7, 17,
         ["`required` must be true or a minimum score"]),
        ("---\n- prompt: hi\n  should:\n    - text: x\n      min_score: -1\n", 7, 18, ["`min_score` must be"]),
        ("---\n- prompt: hi\n  should:\n    - $contains: x\n      score_ranges: {0: a, 10: b}\n", 7, 7,
         ["`score_ranges` applies to judged points only"]),
        ("---\n- prompt: hi\n  should:\n    - text: x\n      score_ranges: {2: a, 10: b}\n", 7, 21,
         ["must start at 0"]),
        ("---\n- prompt: hi\n  should:\n    - text: x\n      score_ranges: [{score_range: [0, 6], outcome: a},"
         " {score_range: [5, 10], outcome: b}]\n", 7, 21, ["overlap"]),
    ],
)
def test_located_errors(text, line, column, words):
    result = parse(text)
    assert result.errors, "expected an error"
    error = result.errors[0]
    assert (error.line, error.column) == (line, column), error.format()
    assert all(w in error.message for w in words), error.message


def test_bands_with_a_gap_are_a_warning():
    result = parse("---\n- prompt: hi\n  should:\n    - text: x\n      score_ranges: [{score_range: [0, 3], outcome: a},"
                   " {score_range: [7, 10], outcome: b}]\n")
    assert result.ok
    assert any("4, 5, 6" in w.message for w in result.warnings)
