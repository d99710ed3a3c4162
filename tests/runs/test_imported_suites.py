"""AgentV and AI Eval suites from the seeds, imported with their companion files and run end to end against
the fake LLM server: verdicts, gates, trials, metric checks and script graders stored and aggregated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blueprints.models import Blueprint
from blueprints.editing import check_text
from blueprints.importing import import_files, import_folder
from runs import spec as run_spec
from runs import start as run_start
from runs.models import PointAssessment, Response

from .conftest import judge_rules

SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"

pytestmark = pytest.mark.django_db(transaction=True)

BAND_JUDGE = {"model": "judge", "match": r"(?s)CLASS_SCORE_10",
              "reply": "<reflection>Mostly.</reflection><classification>CLASS_SCORE_8</classification>"}
TRAJECTORY = "\n".join([
    'TOOL_CALL {"name": "search_entity_list", "arguments": {"query": "Huawei"}}',
    'TOOL_CALL {"name": "check_regulations", "arguments": {}}',
    'TOOL_CALL {"name": "generate_report", "arguments": {}}',
])


def imported(folder: Path) -> dict[str, Blueprint]:
    outcome = import_folder(folder)
    return {item.slug: item.blueprint for item in outcome.items if item.blueprint is not None}


def test_the_complete_agentv_example_runs_with_gates_trials_and_metric_checks(fake_provider, monkeypatch, settings):
    settings.EVALSITE_ALLOW_CODE_JUDGES = False
    fake_provider.script([
        # One trial of the sanctioned entity makes the expected tool calls; the others do not.
        {"model": "cand", "match": "Huawei", "times": 1,
         "reply": f"{TRAJECTORY}\nDENIED - Huawei is on the BIS Entity List (EAR 744.11)."},
        {"model": "cand", "match": "Huawei", "reply": "DENIED - Huawei is on the BIS Entity List."},
        {"model": "cand", "match": "Siemens", "reply": "APPROVED - Siemens AG is not a listed party."},
        {"model": "cand", "match": "Beijing", "reply": "REVIEW REQUIRED: possible military end-use."},
        *judge_rules(),
    ])
    blueprint = imported(SEEDS / "002" / "complete")["export-screening"]
    revision = blueprint.current_revision
    assert revision.dialect == "agentv" and revision.is_valid
    assert set(revision.files) == {"judges/safety.md", "judges/regulatory-accuracy.md",
                                   "scripts/verify-entity-match.ts", "scripts/check-risk-factors.ts"}
    assert revision.import_report["via"] == "import_blueprints" and len(revision.import_report["tests"]) == 3
    assert revision.extras["workspace"]["template"] == "./workspace-template"

    run = run_start.start_run(blueprint, models=["openai:cand"], judges=["openai:judge"])
    run.refresh_from_db()
    assert run.status == "done", run.error
    assert run.items_total == 9  # 3 tests x 1 model x 3 trials (execution.trials.count)

    rows = {}
    for row in Response.objects.filter(run=run):
        rows.setdefault(row.prompt_id, []).append(row)
    sanctioned = sorted(rows["sanctioned-entity"], key=lambda r: -(r.score or 0))
    good, bad = sanctioned[0], sanctioned[1]
    assert (good.score, good.verdict, good.gates_failed) == (1.0, "pass", [])
    # The tool_trajectory gate failed: the score is 0 and the page can say which gate did it.
    assert (bad.score, bad.verdict, bad.gates_failed) == (0.0, "fail", ["tool_trajectory"])
    assert bad.score_before_gates > 0.5 and "tool_trajectory" in bad.verdict_reason
    checks = {c["id"]: c for c in bad.checks}
    assert checks["contains"]["passed"] is True and checks["tool_trajectory"]["passed"] is False
    assert checks["code_judge"]["score"] is None  # off: not evaluated, never a fail
    points = {p.fn: p for p in PointAssessment.objects.filter(response=good) if p.fn}
    assert points["code_judge"].score is None and "EVALSITE_ALLOW_CODE_JUDGES" in points["code_judge"].error
    assert points["latency_under"].score == 1.0  # the fake server answers well under 10 s
    assert points["cost_under"].score is None and "unknown" in points["cost_under"].error

    cells = run.aggregates["cellDetails"]
    sanctioned_cell = cells["sanctioned-entity"]["openai:cand[temp:0]"]
    assert (sanctioned_cell["aggregation"], sanctioned_cell["k"], sanctioned_cell["score"]) == ("best", 3, 1.0)
    assert (sanctioned_cell["verdict"], sanctioned_cell["passedTrials"]) == ("pass", 1)
    assert sanctioned_cell["agreement"] == pytest.approx(2 / 3)
    assert run.aggregates["cells"]["sanctioned-entity"]["openai:cand[temp:0]"] == 1.0  # best of the trials
    assert cells["clean-entity"]["openai:cand[temp:0]"]["verdict"] == "pass"
    assert run.aggregates["variants"]["openai:cand[temp:0]"]["verdicts"] == {"pass": 3, "borderline": 0, "fail": 0}


def test_a_script_grader_runs_in_a_run_when_the_operator_allows_it(fake_provider, settings):
    settings.EVALSITE_ALLOW_CODE_JUDGES = True
    fake_provider.script([
        {"model": "cand", "match": "Review this code",
         "reply": "This is SQL injection. Use parameterized queries; an attacker could read every user."},
        BAND_JUDGE, *judge_rules(),
    ])
    blueprint = imported(SEEDS / "004" / "complex")["complex"]
    assert set(blueprint.current_revision.files) == {"prompts/security-reviewer.md", "fixtures/vulnerable.py",
                                                     "judges/security_check.py"}
    run = run_start.start_run(blueprint, models=["openai:cand"], judges=["openai:judge"])
    run.refresh_from_db()
    assert run.status == "done", run.error
    row = Response.objects.get(run=run)
    sent = [r for r in fake_provider.requests() if r["model"] == "cand"][0]["body"]["messages"]
    assert "security reviewer" in sent[0]["content"] and "SELECT * FROM users" in sent[1]["content"]
    grader = PointAssessment.objects.get(response=row, fn="code_judge")
    assert grader.score == 1.0 and "looked for the two key phrases" in grader.reflection
    assert row.score == 1.0 and row.verdict == "pass"


def test_an_external_jsonl_dataset_comes_along_and_runs(fake_provider):
    fake_provider.script([
        {"model": "cand", "match": "Huawei", "reply": "DENIED."},
        {"model": "cand", "match": "Siemens", "reply": "Needs review."},
        *judge_rules(),
    ])
    blueprint = imported(SEEDS / "002" / "external-jsonl")["screening"]
    run = run_start.start_run(blueprint, models=["openai:cand"], judges=["openai:judge"])
    run.refresh_from_db()
    scores = {r.prompt_id: (r.score, r.verdict) for r in Response.objects.filter(run=run)}
    # `contains` is the only assertion (the criteria are context); AgentV's bands give the verdicts.
    assert scores == {"huawei": (1.0, "pass"), "siemens": (0.0, "fail")}


def test_ai_eval_suites_import_with_their_prompt_files_and_run(fake_provider):
    fake_provider.script([
        {"model": "cand", "match": "Say hello", "reply": "hello! Nice to meet you."},
        # The prompt file's tools are offered natively (as AI Eval does); without tool_mocks the call is recorded.
        {"model": "cand", "match": "weather in San Francisco",
         "tool_calls": [{"name": "get_weather", "arguments": {"location": "San Francisco"}}], "reply": "Sunny."},
        {"model": "cand", "match": "wrap errors", "reply": "Use fmt.Errorf with %w."},
        *judge_rules(),
    ])
    outcome = import_folder(SEEDS / "003" / "project")
    by_name = {item.name: item for item in outcome.items}
    assert "prompts/hello.yaml" not in by_name  # prompt files come with the suites, not as blueprints
    assert not by_name["tests/missing-prompt.yaml"].is_valid and not by_name["tests/no-checks.yaml"].is_valid
    hello = by_name["tests/hello-tests.yaml"].blueprint
    assert hello.current_revision.dialect == "aieval"
    assert hello.current_revision.files == {"../prompts/hello.yaml": (SEEDS / "003/project/prompts/hello.yaml")
                                            .read_text()}

    run = run_start.start_run(hello, models=["openai:cand"], judges=["openai:judge"])
    run.refresh_from_db()
    row = Response.objects.get(run=run)
    assert (row.score, row.verdict) == (1.0, "pass")
    assert [c["minScore"] for c in row.checks] == [0.8, 1.0]
    cell = run.aggregates["cellDetails"]["greeting"]["openai:cand[temp:0]"]
    assert (cell["aggregation"], cell["passAtK"], cell["verdict"]) == ("pass_at_k", 1.0, "pass")

    tools = by_name["tests/tools.yaml"].blueprint
    run = run_start.start_run(tools, models=["openai:cand"], judges=["openai:judge"])
    run.refresh_from_db()
    verdicts = {r.prompt_id: (r.score, r.verdict) for r in Response.objects.filter(run=run)}
    assert verdicts == {"weather": (1.0, "pass"), "search": (0.0, "fail")}

    with pytest.raises(run_spec.RunRefused) as refused:
        run_start.start_run(by_name["tests/missing-prompt.yaml"].blueprint, models=["openai:cand"])
    assert "no prompt file named 'nowhere'" in str(refused.value)


def test_trials_from_a_blueprint_and_a_run_override(fake_provider):
    fake_provider.script([{"model": "cand", "match": ".", "reply": "hello"}])
    text = ("title: t\nmodels: [openai:cand]\ntrials: 2\ntrial_aggregation: pass_at_k\n---\n"
            "- id: a\n  prompt: say hello\n  should:\n    - $contains: hello\n")
    blueprint = import_files([("t.yml", text, {})], via="test").items[0].blueprint
    run = run_start.start_run(blueprint)
    run.refresh_from_db()
    assert run.items_total == 2 and run.status == "done"
    cell = run.aggregates["cellDetails"]["a"]["openai:cand[temp:0]"]
    assert (cell["k"], cell["passHatK"]) == (2, None)  # no verdict layer: pass rates need verdicts
    again = run_start.start_run(blueprint, trials=1)
    assert again.items_total == 1


def test_the_editor_and_a_browser_save_keep_the_companion_files():
    blueprint = imported(SEEDS / "002" / "composite")["composite"]
    revision = blueprint.current_revision
    edited = revision.text.replace("weight: 3.0", "weight: 2.0")
    assert check_text(edited, slug=blueprint.slug).result.ok  # the judge prompts come from the saved revision
    assert not check_text(edited).result.ok  # without them, the missing files are named
    new, created = blueprint.save_revision(edited, summary="Edited in evalsite")
    assert created and new.files == revision.files and new.dialect == "agentv" and new.is_valid
    assert json.dumps(new.import_report)  # the report is stored for the page


def test_uploads_attach_companion_files_to_the_suites_beside_them():
    project = SEEDS / "003" / "project"
    files = [(f"tests/{p.name}", p.read_text(), {}) for p in (project / "tests").glob("hello-tests.yaml")]
    files += [(f"prompts/{p.name}", p.read_text(), {}) for p in (project / "prompts").glob("*.yaml")]
    outcome = import_files(files, via="upload")
    statuses = {item.name: item.status for item in outcome.items}
    assert statuses["tests/hello-tests.yaml"] == "created" and statuses["prompts/hello.yaml"] == "attached"
    suite = next(i for i in outcome.items if i.name == "tests/hello-tests.yaml")
    assert suite.revision.is_valid and "../prompts/hello.yaml" in suite.revision.files


def test_result_pages_show_verdicts_gates_trials_and_metric_checks(fake_provider, client):
    fake_provider.script([
        {"model": "cand", "match": "Huawei", "times": 1,
         "reply": f"{TRAJECTORY}\nDENIED - Huawei is on the BIS Entity List (EAR 744.11)."},
        {"model": "cand", "match": "Huawei", "reply": "DENIED - Huawei is on the BIS Entity List."},
        {"model": "cand", "match": ".", "reply": "APPROVED. REVIEW REQUIRED."},
        *judge_rules(),
    ])
    blueprint = imported(SEEDS / "002" / "complete")["export-screening"]
    run = run_start.start_run(blueprint, models=["openai:cand"], judges=["openai:judge"])
    gated = Response.objects.filter(run=run, prompt_id="sanctioned-entity", score=0.0).first()

    page = client.get(f"/runs/{run.pk}/responses/{gated.pk}/").content.decode()
    assert "verdict-fail" in page and "Failed gate" in page and "<strong>tool_trajectory</strong>" in page
    assert "gate failed" in page and "Metric checks" in page and "latency_under" in page
    assert "best of 3 trials" in page and "1 of 3 trials passed" in page

    run_page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Verdicts and trials" in run_page and "1/3 trials passed" in run_page
    prompt_page = client.get(f"/runs/{run.pk}/prompts/0/").content.decode()
    assert "verdict-" in prompt_page and "best of 3 trials" in prompt_page

    # A reviewer who lifts the failed gate lifts the zero too; the verdict follows.
    from runs.overrides import apply_override

    gate_point = PointAssessment.objects.get(response=gated, fn="tool_trajectory")
    apply_override(gate_point, 1.0, reason="the calls were made, in another format")
    gated.refresh_from_db()
    assert gated.score > 0.9 and gated.verdict == "pass" and gated.gates_failed == []
    # The export reads the same score, through the same engine functions, with the reviewer's reason beside it.
    from runs.exports import run_to_csv, run_to_json

    exported = run_to_json(run)
    if gated.trial == 0:
        assert exported["evaluationResults"]["llmCoverageScores"]["sanctioned-entity"][gated.variant_id][
            "avgCoverageExtent"] == gated.score
    trial = next(t for t in exported["evalsite"]["responses"]["sanctioned-entity"][gated.variant_id]["trials"]
                 if t["trial"] == gated.trial)
    assert (trial["score"], trial["verdict"], trial["judgedScore"]) == (gated.score, "pass", 0.0)
    point = trial["points"][gate_point.position]
    assert point["override"]["reason"] == "the calls were made, in another format" and point["judgesScore"] == 0.0
    assert f",{gated.trial},{gated.score}," in run_to_csv(run)
    apply_override(gate_point, None)
    gated.refresh_from_db()
    assert (gated.score, gated.verdict) == (0.0, "fail")


def test_the_blueprint_page_shows_the_import_report_per_test(client):
    blueprint = imported(SEEDS / "002" / "complete")["export-screening"]
    page = client.get(f"/blueprints/{blueprint.slug}/").content.decode()
    assert "Imported from AgentV suite" in page
    assert "<code>sanctioned-entity</code>" in page and "<code>ambiguous-entity</code>" in page
    assert "has no workspace for an agent to work in" in page
    assert "<code>judges/safety.md</code>" in page


RUNNABLE = [
    *(f"001/{name}" for name in (
        "expected-outcome.yaml", "outcome-alias.yaml", "inline-rubrics.yaml", "explicit-rubric-evaluator.yaml",
        "expected-messages-tool-calls.yaml", "tool-calls-without-input.yaml", "trajectory-minimums.yaml",
        "trajectory-in-order.yaml", "weight.yaml", "code-judge-argv/EVAL.yaml", "code-judge-string/EVAL.yaml",
        "input-string.yaml", "input-array.yaml", "input-canonical-wins.yaml", "expected-output-string.yaml",
        "expected-output-object.yaml", "expected-output-tool-calls.yaml", "expected-canonical-wins.yaml")),
    *(f"002/{name}" for name in (
        "metadata.yaml", "assert-placement.yaml", "assert-types/EVAL.yaml", "rubrics-group.yaml",
        "composite/EVAL.yaml", "gates/EVAL.yaml", "inheritance.yaml", "external-csv/EVAL.yaml",
        "external-inline/EVAL.yaml", "file-refs/EVAL.yaml", "execution.yaml")),
    *(f"004/{name}" for name in (
        "fields.yaml", "rubrics.yaml", "execution/EVAL.yaml", "conversation.yaml", "description-note.yaml",
        "basic.yaml")),
    *(f"003/project/tests/{name}" for name in ("expected.yaml", "json.yaml", "evaluators.yaml")),
]


@pytest.mark.parametrize("relative", RUNNABLE)
def test_every_self_contained_seed_example_runs_end_to_end(relative, fake_provider):
    from blueprints.importing import companion_files

    fake_provider.script([{"model": "cand", "match": ".", "reply": "DENIED. Hello Alice! The answer is 4."},
                          BAND_JUDGE, *judge_rules()])
    path = SEEDS / relative
    root = SEEDS / "003" / "project" if relative.startswith("003") else path.parent
    text = path.read_text()
    outcome = import_files([(relative.replace("/", "-"), text, companion_files(path, text, root))], via="test")
    blueprint = outcome.items[0].blueprint
    assert outcome.items[0].revision.is_valid
    run = run_start.start_run(blueprint, models=["openai:cand"], judges=["openai:judge"], trials=1)
    run.refresh_from_db()
    assert run.status == "done" and run.items_failed == 0 and run.judge_calls_failed == 0, run.error
    for row in Response.objects.filter(run=run):
        # Scored, or not evaluated with the reason (a script grader that is off, an unknown price...).
        assert row.score is not None or row.not_evaluated_reason, (row.prompt_id, row.not_evaluated_reason)
        if row.checks:
            assert row.verdict or row.verdict_reason


def test_each_agentv_suite_gets_its_own_id_and_another_file_never_overwrites_one(tmp_path):
    suite = "description: {team}\ntests:\n  - id: t1\n    input: Hello\n    criteria: Greets back\n"
    for team in ("team-a", "team-b"):
        (tmp_path / "evals" / team).mkdir(parents=True)
        (tmp_path / "evals" / team / "EVAL.yaml").write_text(suite.format(team=team))
    (tmp_path / "named").mkdir()
    (tmp_path / "named" / "EVAL.yaml").write_text("name: greeter\n" + suite.format(team="named"))
    outcome = import_folder(tmp_path)
    assert sorted(item.slug for item in outcome.items) == ["evals__team-a", "evals__team-b", "greeter"]

    # A different file that would take an existing id is refused, with the fix; the first suite is untouched.
    again = import_files([("elsewhere/greeter/EVAL.yaml", "name: greeter\n" + suite.format(team="other"), {})],
                         via="test")
    (item,) = again.items
    assert item.status == "refused" and "belongs to the suite imported from 'named/EVAL.yaml'" in item.message
    assert Blueprint.objects.get(slug="greeter").revisions.count() == 1
    # The same file imported again is a new revision of its own suite, as before.
    same = import_files([("named/EVAL.yaml", "name: greeter\n" + suite.format(team="changed"), {})], via="test")
    assert same.items[0].status == "updated"
