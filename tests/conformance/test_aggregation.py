"""Every record of shared/conformance/aggregation.json.

Deviations (DESIGN.md, "Scoring semantics") are named with the records they touch:

* deviation 1 (no scorable point: not evaluated, never 0): `agg-empty` expects 0
  and gets None here; `agg-path-all-null`'s path of errors is left out rather
  than scored 0, and its number stands.
* deviation 2 (`should_not` paths are `not_path_<i>`, their own groups, the worst
  counts): `agg-eval-should-and-should_not-paths`, whose inverted points carry the
  upstream's coinciding `path_<i>` ids; we number them as our parser does. The
  record holds either way.
* deviation 6 (required + best path averaged as two groups): the upstream's code,
  so `agg-required-plus-paths` and `agg-or-required-plus-two-paths` hold as written.
"""

from __future__ import annotations

import asyncio

import pytest

from blueprints.spec.parse import parse_blueprint
from runs.engine.assess import assess_response
from runs.engine.judge import JudgePlan, JudgeSpec
from runs.engine.scoring import ScoredPoint, aggregate, calculate, round2
from runs.engine.types import ChatRequest, ChatResult, GeneratedResponse, Turn

from .matchers import assert_matches, load_records, record_ids

RECORDS = load_records("aggregation.json")
NOT_EVALUATED_INSTEAD_OF_ZERO = {"agg-empty"}  # deviation 1
SHOULD_NOT_PATHS_RENUMBERED = {"agg-eval-should-and-should_not-paths"}  # deviation 2


def points_of(record: dict) -> list[ScoredPoint]:
    points = []
    for p in record["points"]:
        path_id = p["pathId"] or None
        if path_id and p.get("isInverted") and record["id"] in SHOULD_NOT_PATHS_RENUMBERED:
            path_id = "not_" + path_id  # as our parser numbers should_not paths
        points.append(ScoredPoint(score=p["score"], multiplier=p.get("multiplier"), path_id=path_id))
    return points


@pytest.mark.parametrize("record", RECORDS, ids=record_ids(RECORDS))
def test_aggregation_record(record):
    score = aggregate(points_of(record))
    if record["id"] in NOT_EVALUATED_INSTEAD_OF_ZERO:
        assert record["expect"] == 0.0  # the upstream's 0 for "nothing to score"
        assert score is None  # deviation 1: not evaluated
        return
    if record.get("round") == 2 and score is not None:
        score = round2(score)
    assert_matches(score, record["expect"])


def test_agg_path_all_null_leaves_the_errored_path_out_and_its_number_stands():
    record = next(r for r in RECORDS if r["id"] == "agg-path-all-null")
    calc = calculate(points_of(record))
    assert calc.left_out == ("path_1",) and calc.best_path.path_id == "path_2"
    assert calc.score == pytest.approx(record["expect"])


def test_agg_eval_should_and_should_not_paths_as_our_parser_numbers_them():
    result = parse_blueprint("- prompt: q\n  should:\n    - [a, b]\n    - [c]\n  should_not:\n    - [d, e]\n"
                             "    - [f]\n", fmt="yaml")
    ids = [p.path_id for p in result.blueprint.prompts[0].all_points()]
    assert ids == ["path_0", "path_0", "path_1", "not_path_0", "not_path_0", "not_path_1"]
    record = next(r for r in RECORDS if r["id"] == "agg-eval-should-and-should_not-paths")
    assert [p.path_id for p in points_of(record)] == ids
    # best should path 0.95, worst should_not path 0.9: (0.95 + 0.9) / 2
    assert round2(aggregate(points_of(record))) == 0.93


# The two records that count the evaluator's assessments, taken through the parser and assess_response.
# Five judges answering 1, 1, 1, 0.5, 0.5 give the records' mocked 0.8 on the 5-point scale.
FIVE_JUDGES = tuple(JudgeSpec(f"test:j{i}", id=f"j{i}") for i in range(5))
FIVE_JUDGES_ANSWERS = ["CLASS_EXACTLY_MET"] * 3 + ["CLASS_MODERATELY_MET"] * 2


async def _five_judges(request: ChatRequest) -> ChatResult:
    index = int(request.model_id.removeprefix("test:j"))
    return ChatResult(text=f"<reflection>r</reflection><classification>{FIVE_JUDGES_ANSWERS[index]}"
                           "</classification>")


async def _always_exact(request: ChatRequest) -> ChatResult:
    return ChatResult(text="<reflection>r</reflection><classification>CLASS_EXACTLY_MET</classification>")


@pytest.mark.parametrize("record_id, should, complete, judges", [
    ("agg-eval-single-item-path", "    - [is helpful]\n", _always_exact, (JudgeSpec("test:j", id="j"),)),
    ("agg-eval-empty-path-skipped", "    - []\n    - [is helpful]\n", _five_judges, FIVE_JUDGES),
])
def test_evaluator_records_through_the_parser_and_judges(record_id, should, complete, judges):
    record = next(r for r in RECORDS if r["id"] == record_id)
    result = parse_blueprint(f"- id: p\n  prompt: q\n  should:\n{should}", fmt="yaml")
    prompt = result.blueprint.prompts[0]
    response = GeneratedResponse(prompt_id="p", model_variant_id="m[temp:0]", text="I can help.",
                                 final_text="I can help.",
                                 conversation=(Turn("user", "q"), Turn("assistant", "I can help.", generated=True)))
    assessed = asyncio.run(assess_response(prompt, response, judges=JudgePlan(judges=judges, configured=True),
                                           complete=complete))
    assert assessed.key_points_count == record["expect_point_count"]
    assert [pa.path_id for pa in assessed.point_assessments] == [p["pathId"] for p in record["points"]]
    assert [pa.score for pa in assessed.point_assessments] == [p["score"] for p in record["points"]]
    assert_matches(assessed.score, record["expect"])
