"""Every record of shared/conformance/judge_consensus.json.

Consensus records mock each judge's result, as the upstream's tests do: here a
fake ``ask`` stands in for calling and parsing one judge, and the real
``judge_point`` does the rest. Criteria-list and agreement records go through
the parser and ``assess_response``, with judges scripted to answer the
classification whose score the record gives.

No record here contradicts a deviation (DESIGN.md, "Scoring semantics").
Deviation 17 (the backup serves only when every default judge failed) is
checked beside `judge-consensus-custom-partial-failure-no-backup`, which is
also the record for "failed judges are not in individualJudgements".
"""

from __future__ import annotations

import asyncio

import pytest
import yaml

from blueprints.spec.parse import parse_blueprint
from blueprints.spec.schema import Point, Prompt
from runs.engine.assess import assess_response, judge_tasks, judged_point_assessment
from runs.engine.export_shape import export_point, export_response
from runs.engine.judge import FIVE_POINT, UPSTREAM_BACKUP_JUDGE, JudgePlan, JudgeSpec, JudgeTask, JudgeVerdict, \
    judge_point
from runs.engine.types import ChatRequest, ChatResult, GeneratedResponse, Turn

from .matchers import ABSENT, assert_matches, load_records, record_ids

RECORDS = load_records("judge_consensus.json")
CONSENSUS = [r for r in RECORDS if any("result" in j for j in r.get("judges", []))]
CRITERIA = [r for r in RECORDS if "allKeyPoints_passed_to_judge" in r["expect"]]
AGREEMENT = [r for r in RECORDS if r not in CONSENSUS and r not in CRITERIA]

TASK = JudgeTask(criterion="The response is helpful", conversation=(Turn("user", "q"),), subject_text="answer")
BACKUP = JudgeSpec(UPSTREAM_BACKUP_JUDGE, id="backup-claude-4-5-haiku")


def test_every_record_is_checked_once():
    assert len(CONSENSUS) + len(CRITERIA) + len(AGREEMENT) == len(RECORDS)
    assert {r["id"] for r in AGREEMENT} == {"judge-agreement-perfect", "judge-agreement-opposed",
                                            "judge-agreement-single-judge", "judge-agreement-fn-points-only",
                                            "judge-agreement-fingerprint-stable"}


def spec_of(judge: dict) -> JudgeSpec:
    return JudgeSpec(model=judge["model"], approach=judge["approach"], id=judge.get("id"))


def mocked_consensus(judges: list[dict], configured: bool, backup_result: dict | None = None):
    """Run judge_point with each judge's result mocked; returns (consensus, judges asked)."""
    specs = tuple(spec_of(j) for j in judges)
    results = {spec.judge_id: j["result"] for spec, j in zip(specs, judges)}
    if backup_result is not None:
        results[BACKUP.judge_id] = backup_result
    asked: list[JudgeSpec] = []

    async def ask(judge, task, plan, complete, role):
        asked.append(judge)
        result = results[judge.judge_id]
        if "error" in result:
            return JudgeVerdict(judge=judge, role=role, error=result["error"], calls=1)
        return JudgeVerdict(judge=judge, role=role, score=result["coverage_extent"], reflection=result["reflection"],
                            calls=1)

    async def unused(request: ChatRequest) -> ChatResult:
        raise AssertionError("the mocked judges make no calls")

    plan = JudgePlan(judges=specs, configured=configured, backup=None if configured else BACKUP)
    return asyncio.run(judge_point(TASK, plan, unused, ask=ask)), asked


@pytest.mark.parametrize("record", CONSENSUS, ids=record_ids(CONSENSUS))
def test_consensus_record(record):
    consensus, asked = mocked_consensus(record["judges"], record["judges_configured"])
    exported = export_point(judged_point_assessment(Point(text=TASK.criterion), consensus))
    expect = dict(record["expect"])
    assert len(asked) == expect.pop("calls")
    count = expect.pop("individualJudgements.length")
    assert len(exported.get("individualJudgements", [])) == count
    assert_matches(exported, expect, partial=True)


def test_default_judges_call_the_backup_only_when_all_of_them_failed_deviation_17():
    record = next(r for r in CONSENSUS if r["id"] == "judge-consensus-custom-partial-failure-no-backup")
    # The same judges as defaults: one answered, so no backup (the upstream would call it).
    consensus, asked = mocked_consensus(record["judges"], configured=False,
                                        backup_result={"coverage_extent": 0.0, "reflection": "backup"})
    assert len(asked) == 2 and consensus.score == 1.0 and not consensus.backup_used
    # Every default judge failed: the backup stands in, and says so.
    failing = [{**j, "result": {"error": "down"}} for j in record["judges"]]
    consensus, asked = mocked_consensus(failing, configured=False,
                                        backup_result={"coverage_extent": 0.75, "reflection": "backup"})
    assert len(asked) == 3 and consensus.score == 0.75 and consensus.backup_used
    exported = export_point(judged_point_assessment(Point(text=TASK.criterion), consensus))
    assert "NOTE: Backup judge was used" in exported["reflection"]
    assert exported["judgeModelId"] == f"consensus({BACKUP.judge_id})"


def prompt_with(should: list, should_not: list | None = None) -> Prompt:
    item = {"id": "p", "prompt": "q", "should": should}
    if should_not:
        item["should_not"] = should_not
    result = parse_blueprint(yaml.safe_dump([item]), fmt="yaml")
    assert not result.errors, [e.message for e in result.errors]
    return result.blueprint.prompts[0]


def response_to(prompt: Prompt, text: str = "test response") -> GeneratedResponse:
    return GeneratedResponse(prompt_id=prompt.id, model_variant_id="test:candidate[temp:0]", text=text,
                             final_text=text,
                             conversation=(Turn("user", "q"), Turn("assistant", text, generated=True)))


@pytest.mark.parametrize("record", CRITERIA, ids=record_ids(CRITERIA))
def test_criteria_list_record(record):
    prompt = prompt_with(record["should"], record.get("should_not"))
    tasks = judge_tasks(prompt, response_to(prompt))
    assert tasks and len(tasks) == len(prompt.all_points())
    for task in tasks:
        assert list(task.all_criteria) == record["expect"]["allKeyPoints_passed_to_judge"]


LABEL_OF_SCORE = {c.score: c.label for c in FIVE_POINT.classes}


def scripted_judges(judges: list[dict], scores: dict[str, list[float]]):
    """Each judge answers, for criterion i, the 5-point class whose score the record gives."""
    by_model = {j["model"]: scores[j["id"]] for j in judges}

    async def complete(request: ChatRequest) -> ChatResult:
        criterion = request.messages[-1]["content"].split("<CRITERION>\n", 1)[1].split("\n</CRITERION>", 1)[0]
        score = by_model[request.model_id][int(criterion.removeprefix("criterion "))]
        return ChatResult(text=f"<reflection>r</reflection><classification>{LABEL_OF_SCORE[score]}"
                               "</classification>")

    return complete


def assess_agreement_record(record: dict) -> dict:
    if "points" in record:  # function points only: no judge is asked
        prompt = prompt_with(record["points"])
        plan = JudgePlan(judges=(JudgeSpec("test:unused"),))

        async def complete(request):
            raise AssertionError("function points call no judge")
        text = record["response"]
    else:
        count = len(next(iter(record["scores"].values())))
        prompt = prompt_with([f"criterion {i}" for i in range(count)])
        plan = JudgePlan(judges=tuple(spec_of(j) for j in record["judges"]), configured=True)
        complete = scripted_judges(record["judges"], record["scores"])
        text = "test response"
    result = asyncio.run(assess_response(prompt, response_to(prompt, text), judges=plan, complete=complete))
    assert result.score is not None
    return export_response(result)


@pytest.mark.parametrize("record", AGREEMENT, ids=record_ids(AGREEMENT))
def test_agreement_record(record):
    exported = [assess_agreement_record(record) for _ in range(record.get("runs", 1))]
    agreement = exported[0].get("judgeAgreement", ABSENT)
    for key, wanted in record["expect"].items():
        if key == "judgeAgreement":
            assert_matches(agreement, wanted)
        elif key == "judgeSetFingerprint_equal_across_runs":
            prints = {e["judgeAgreement"]["judgeSetFingerprint"] for e in exported}
            assert (len(prints) == 1) is wanted
        elif key.endswith(".length"):
            assert len(agreement[key.removesuffix(".length")]) == wanted
        else:
            assert_matches(agreement[key], wanted)
