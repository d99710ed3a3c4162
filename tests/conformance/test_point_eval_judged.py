"""The judged records of shared/conformance/point_eval.json, through assess_response and the export shape.

The records split with tests/conformance/test_point_eval.py by one rule: a
record whose point names a function (`fn`, or an idiomatic `$name` key) is
checked there, every other record here. The mixed record
`pe-eval-text-and-fn` names a function, so it is checked there (the points
engine raises InvalidPoint with the upstream's words); assess_response raises
the same for such a point (tests/engine/test_assess.py). No record here
contradicts a deviation of DESIGN.md.
"""

from __future__ import annotations

import asyncio

import pytest
import yaml

from blueprints.spec.parse import parse_blueprint
from runs.engine.assess import assess_response
from runs.engine.export_shape import export_point
from runs.engine.judge import FIVE_POINT, JudgePlan, JudgeSpec
from runs.engine.types import ChatRequest, ChatResult, GeneratedResponse, Turn

from .matchers import assert_matches, load_records, record_ids

ALL_RECORDS = load_records("point_eval.json")


def names_a_function(point: object) -> bool:
    return isinstance(point, dict) and (
        bool(point.get("fn")) or any(isinstance(key, str) and key.startswith("$") for key in point)
    )


RECORDS = [r for r in ALL_RECORDS if not names_a_function(r["point"])]


def test_the_records_here_are_the_judged_ones():
    assert record_ids(RECORDS) == ["pe-eval-should-not-llm"]
    assert all("judge_score" in r for r in RECORDS)


@pytest.mark.parametrize("record", RECORDS, ids=record_ids(RECORDS))
def test_judged_point_record(record):
    label = next(c.label for c in FIVE_POINT.classes if c.score == record["judge_score"])

    async def judge(request: ChatRequest) -> ChatResult:
        return ChatResult(text=f"<reflection>Judged.</reflection><classification>{label}</classification>")

    item = {"id": record.get("promptId", "p"), "prompt": "q", record["block"]: [record["point"]]}
    parsed = parse_blueprint(yaml.safe_dump([item]), fmt="yaml")
    assert not parsed.errors, [e.message for e in parsed.errors]
    prompt = parsed.blueprint.prompts[0]
    text = record["response"]
    response = GeneratedResponse(prompt_id=prompt.id, model_variant_id="test:m[temp:0]", text=text, final_text=text,
                                 conversation=(Turn("user", "q"), Turn("assistant", text, generated=True)))
    result = asyncio.run(assess_response(prompt, response, judges=JudgePlan(judges=(JudgeSpec("test:judge"),)),
                                         complete=judge))
    (assessment,) = result.point_assessments
    assert_matches(export_point(assessment), record["expect"], partial=True)
