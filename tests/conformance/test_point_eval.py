"""Every record of shared/conformance/point_eval.json, through the path a run takes.

Each record's point is written into a one-prompt blueprint, read by the
parser, assessed by ``assess_response`` (function points by the points engine,
a judged point by a scripted judge) and written out by the export's
``export_point``: the functions production calls, nothing made for the test.

Two records name points the parser refuses, so in production they never reach
the evaluator (deviation 5: a blueprint with errors cannot run):
``pe-unknown-fn`` (the parser's error carries the upstream's words) and
``pe-eval-text-and-fn`` (the parser gives the upstream parser's own message,
checked by parser.json). For both, the record's evaluator behaviour is checked
too, by handing ``assess_response`` the point the parser would have refused.
"""

from __future__ import annotations

import asyncio

import pytest
import yaml

from blueprints.spec.parse import parse_blueprint
from blueprints.spec.schema import Point, Prompt
from runs.engine.assess import assess_response
from runs.engine.export_shape import export_point
from runs.engine.judge import FIVE_POINT, JudgePlan, JudgeSpec
from runs.engine.points import InvalidPoint
from runs.engine.types import ChatRequest, ChatResult, GeneratedResponse, Turn

from .matchers import assert_matches, load_records, record_ids

RECORDS = load_records("point_eval.json")
REFUSED_BY_THE_PARSER = {"pe-unknown-fn": "Unknown point function: 'unknown'",
                         "pe-eval-text-and-fn": "Point cannot have both 'text' and 'fn' defined"}


def _judge_for(record: dict):
    score = record.get("judge_score")
    label = next((c.label for c in FIVE_POINT.classes if c.score == score), "CLASS_UNMET")

    async def judge(request: ChatRequest) -> ChatResult:
        return ChatResult(text=f"<reflection>Judged.</reflection><classification>{label}</classification>")

    return judge


def _assess(record: dict, prompt: Prompt):
    text = record["response"]
    response = GeneratedResponse(prompt_id=prompt.id, model_variant_id="test:m[temp:0]", text=text, final_text=text,
                                 conversation=(Turn("user", "q"), Turn("assistant", text, generated=True)))
    return asyncio.run(assess_response(prompt, response, judges=JudgePlan(judges=(JudgeSpec("test:judge"),)),
                                       complete=_judge_for(record)))


def _parse(record: dict):
    item = {"id": record.get("promptId", "p"), "prompt": "q", record["block"]: [record["point"]]}
    return parse_blueprint(yaml.safe_dump([item]), fmt="yaml")


def test_the_refused_records_are_the_ones_named():
    refused = [r["id"] for r in RECORDS if _parse(r).errors]
    assert sorted(refused) == sorted(REFUSED_BY_THE_PARSER)


@pytest.mark.parametrize("record", [r for r in RECORDS if r["id"] not in REFUSED_BY_THE_PARSER],
                         ids=record_ids([r for r in RECORDS if r["id"] not in REFUSED_BY_THE_PARSER]))
def test_point_record(record):
    parsed = _parse(record)
    assert not parsed.errors, [e.message for e in parsed.errors]
    (assessment,) = _assess(record, parsed.blueprint.prompts[0]).point_assessments
    assert_matches(export_point(assessment), record["expect"], partial=True)


@pytest.mark.parametrize("record_id", sorted(REFUSED_BY_THE_PARSER))
def test_a_refused_point_is_refused_before_the_run_and_the_evaluator_agrees(record_id):
    record = next(r for r in RECORDS if r["id"] == record_id)
    messages = [e.message for e in _parse(record).errors]
    assert any(REFUSED_BY_THE_PARSER[record_id] in m for m in messages), messages
    # The point the parser refused, handed to the evaluator anyway: the upstream evaluator's behaviour.
    raw = record["point"]
    args = raw.get("fnArgs", raw.get("arg"))
    point = Point(text=raw.get("text"), fn=raw["fn"], fn_args=args, has_args=args is not None,
                  multiplier=raw.get("multiplier", 1.0), inverted=record["block"] == "should_not")
    prompt = Prompt(id=record.get("promptId", "p"), messages=[{"role": "user", "content": "q"}], points=[point])
    expect = record["expect"]
    if "$throws" in expect:
        with pytest.raises(InvalidPoint) as raised:
            _assess(record, prompt)
        assert expect["$throws"] in str(raised.value)
        return
    (assessment,) = _assess(record, prompt).point_assessments
    assert_matches(export_point(assessment), expect, partial=True)


def test_the_functions_checked_here_are_the_ones_production_calls():
    import runs.exports
    import runs.records
    from runs.engine import assess, export_shape

    assert runs.exports.export_response is export_shape.export_response  # export_response calls export_point
    assert runs.exports.evalsite_details is export_shape.evalsite_details
    assert runs.records.apply_overrides is assess.apply_overrides
