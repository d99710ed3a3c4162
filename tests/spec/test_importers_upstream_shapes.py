"""Issue 24, part 2: AgentV's example suites read as AgentV reads them (fixtures: tests/fixtures/upstream/agentv,
whose README names each upstream file and version)."""

from __future__ import annotations

from pathlib import Path

from blueprints.spec import parse_any
from blueprints.spec.companions import collect_companions
from blueprints.spec.files import validate_file

UPSTREAM = Path(__file__).resolve().parents[1] / "fixtures" / "upstream" / "agentv"


def _read(path: Path, root: Path | None = None):
    report = validate_file(path, root=root or path.parent)
    assert report.result.ok, report.result.errors
    assert report.result.dialect == "agentv"
    return {p.id: p for p in report.result.blueprint.prompts}, report.result


# --- a. rubric items whose score_ranges is a map, with no outcome (v2.18.3 examples/features/rubric) ------------


def test_score_range_maps_without_an_outcome_are_judged_points_with_bands():
    prompts, result = _read(UPSTREAM / "rubric" / "evals" / "dataset.eval.yaml")
    assert not [d for d in result.diagnostics if d.code == "rubrics"]
    accuracy, brevity = prompts["score-ranges-map"].points
    assert (accuracy.label, brevity.label) == ("accuracy", "brevity")
    assert accuracy.text == "accuracy" and accuracy.multiplier == 2 / 3 and brevity.multiplier == 1 / 3
    assert accuracy.min_score == 0.8 and brevity.min_score is None  # required_min_score: 8
    assert [(b.low, b.high) for b in accuracy.score_ranges] == [(0, 2), (3, 5), (6, 7), (8, 9), (10, 10)]
    assert [(b.low, b.high, b.text) for b in brevity.score_ranges] == [
        (0, 4, "Over 30 words."), (5, 9, "Under 30 words but unclear."), (10, 10, "Under 30 words and clear.")]
    # The other rubric shapes of the example read as before: text items, weighted objects, beside a code grader.
    assert [p.multiplier for p in prompts["weighted-objects"].points] == [1 / 3, 2 / 3]
    assert [p.fn for p in prompts["with-a-code-grader"].points] == [None, None, "code_judge"]
    assert "check_syntax.py" in result.blueprint.prompts[2].points[2].fn_args["command"]


def test_a_checklist_rubric_object_without_an_outcome_is_still_an_error():
    text = ("tests:\n  - id: t\n    criteria: c\n    input: hi\n    assert:\n      - type: rubrics\n"
            "        criteria:\n          - {id: no-outcome, weight: 1}\n")
    result = parse_any(text, path="EVAL.yaml")
    assert not result.ok and "needs `outcome:`" in result.errors[0].message


# --- b. plain strings in the suite's root `assertions:` (v4 examples/features/default-graders) -----------------


def test_root_plain_string_assertions_are_one_rubric_evaluator_on_every_test_that_takes_defaults():
    prompts, result = _read(UPSTREAM / "default-graders" / "evals" / "dataset.eval.yaml")
    assert not result.errors
    hello = prompts["hello"].points
    assert [(p.text, p.multiplier, p.check_id) for p in hello] == [("Keeps a courteous tone", 1.0, "rubrics")]
    assert (hello[0].origin.line, hello[0].origin.path) == (9, "assertions[0]")
    # The test's own grader first, the suite's defaults after (AgentV appends root graders).
    assert [p.check_id for p in prompts["own-grader"].points] == ["helpful", "rubrics"]
    assert prompts["own-grader"].points[0].text == "Helps with a password reset"
    assert [p.check_id for p in prompts["opted-out"].points] == ["urgency"]  # skip_defaults


def test_root_plain_strings_are_weighted_by_their_count_and_stand_where_the_first_one_stands():
    text = ("assertions:\n  - {type: contains, value: Hello}\n  - Is polite\n  - Is brief\n"
            "tests:\n  - id: t\n    criteria: greets\n    input: hi\n")
    [prompt] = parse_any(text, path="EVAL.yaml").blueprint.prompts
    assert [(p.fn, p.text, p.multiplier) for p in prompt.points] == [
        ("contains", None, 1.0), (None, "Is polite", 1.0), (None, "Is brief", 1.0)]
    assert [p.origin.line for p in prompt.points] == [2, 3, 4]


# --- c. a bare .jsonl file of tests is read as the tests it holds (upstream loadTests) -------------------------


def test_a_bare_jsonl_file_is_read_as_an_agentv_suite_of_its_lines():
    path = UPSTREAM / "basic-jsonl" / "evals" / "dataset.jsonl"
    files = collect_companions(path, path.read_text(), root=UPSTREAM)
    assert dict(files) == {"../basic/evals/javascript.instructions.md":
                           (UPSTREAM / "basic/evals/javascript.instructions.md").read_text()}
    result = parse_any(path.read_text(), path=str(path), files=files)
    assert result.ok and result.dialect == "agentv", result.errors
    prompts = {p.id: p for p in result.blueprint.prompts}
    assert list(prompts) == ["review-js", "shorthand-string", "shorthand-object", "multi-turn"]
    assert "MARKER_JS once" in prompts["review-js"].messages[1].content
    assert prompts["shorthand-string"].ideal_response == "7"
    assert prompts["multi-turn"].origin.line == 5  # the blank line 4 is skipped, lines keep their numbers
    assert not [w for w in result.warnings if w.code == "missing-file"]


def test_validate_file_reads_a_one_line_jsonl_file_as_tests_too(tmp_path):
    (tmp_path / "one.jsonl").write_text('{"id": "a", "input": "hi", "criteria": "greets"}\n')
    prompts, _ = _read(tmp_path / "one.jsonl")
    assert list(prompts) == ["a"]


def test_a_jsonl_sidecar_gives_the_suite_its_description_and_execution(tmp_path):
    (tmp_path / "cases.jsonl").write_text('{"id": "a", "input": "hi", "criteria": "greets"}\n')
    (tmp_path / "cases.yaml").write_text("description: From the sidecar\nexecution:\n  trials: {count: 3}\n")
    path = tmp_path / "cases.jsonl"
    files = collect_companions(path, path.read_text(), root=tmp_path)
    assert set(files) == {"cases.yaml"}
    result = parse_any(path.read_text(), path=str(path), files=files)
    assert result.ok and result.blueprint.description == "From the sidecar"
    assert result.blueprint.prompts[0].trials == 3


def test_a_bad_jsonl_line_is_located_and_v5_rows_are_refused():
    result = parse_any('{"id": "a", "input": "hi", "criteria": "c"}\n{"id": b}\n', path="x.jsonl")
    [error] = result.errors
    assert (error.line, error.code) == (2, "syntax") and "JSON Lines" in error.message
    result = parse_any('{"vars": {"q": "hi"}}\n', path="x.jsonl")
    assert not result.ok and result.dialect == "agentv-v5" and "vars" in result.errors[0].message


# --- d. where the summation order of an imported suite's score lives -------------------------------------------


def test_function_points_are_added_up_first_as_the_upstream_does_so_a_rounding_edge_rounds_the_same():
    """The points keep their rubric order (here AgentV's evaluator order: two rubric items, then a code
    grader), but the engine adds up function points first, as Weval's assessor orders them (reference 3.1
    step 5): in this shape the sum lands on 0.5249999... and rounds to 0.52 as upstream, not 0.53."""
    from runs.engine.scoring import ScoredPoint, calculate, round2

    prompts, _ = _read(UPSTREAM / "rubric" / "evals" / "dataset.eval.yaml")
    points = prompts["with-a-code-grader"].points
    assert [p.fn or "judged" for p in points] == ["judged", "judged", "code_judge"]

    # One shape of this kind (four rubric items and a code grader), in rubric order.
    shares, scores = [0.25] * 4 + [1.0], [0.0, 0.0, 0.1, 0.1, 1.0]
    kinds = ["judged"] * 4 + ["function"]
    score = calculate([ScoredPoint(s, w, None, k) for s, w, k in zip(scores, shares, kinds)]).score
    assert score == 0.5249999999999999 and round2(score) == 0.52
    # Without kinds (every point alike) the rubric order's own sum stands.
    assert calculate([ScoredPoint(s, w) for s, w in zip(scores, shares)]).score == 0.525
