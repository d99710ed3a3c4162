"""Runs end to end through the worker path (tasks run inline): a real corpus blueprint, the fake LLM server
as candidates and judges, and every stored field checked."""

import csv
import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db.models import F

from blueprints.models import Blueprint
from blueprints.importing import import_files
from runs import spec as run_spec
from runs import start as run_start
from runs import work as run_work
from runs.exports import run_to_csv, run_to_json
from runs.models import PointAssessment, PointOverride, Response, Run

from .conftest import FAKE_KEY, judge_rules

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "weval-configs"
MMLU = CORPUS / "blueprints" / "benchmarks" / "mmlu-pro-evaluating-higher-order-reasoning-and-shortcut.yml"

pytestmark = pytest.mark.django_db(transaction=True)


def corpus_blueprint() -> Blueprint:
    outcome = import_files([("benchmarks/mmlu-pro.yml", MMLU.read_text(), {})], via="test")
    return outcome.items[0].blueprint


def script_candidates(fake):
    fake.script([
        {"model": "cand-a", "match": "What number", "reply": "The answer is L: both 9 and 36/4 are correct."},
        {"model": "cand-a", "match": "Grid search", "reply": "K. Both are disadvantages."},
        {"model": "cand-b", "match": ".", "reply": "No idea."},
        *judge_rules(unmet_text="No idea"),
    ])


def test_a_corpus_blueprint_runs_through_the_worker_path_and_every_field_is_stored(fake_provider):
    script_candidates(fake_provider)
    blueprint = corpus_blueprint()
    run = run_start.start_run(blueprint, models=["openai:cand-a", "openai:cand-b"],
                             judges=["openai:judge-a", "openai:judge-b"])
    run.refresh_from_db()
    assert run.status == "done", run.error
    assert (run.items_total, run.items_done, run.items_failed) == (4, 4, 0)
    # 2 prompts x 2 models x 5 judged points x 2 judges
    assert (run.judge_calls_total, run.judge_calls_done, run.judge_calls_failed) == (40, 40, 0)

    responses = {(r.prompt_id, r.variant_id): r for r in Response.objects.filter(run=run)}
    good = responses[("math-q1", "openai:cand-a[temp:0]")]
    assert good.status == "done" and good.final_text.startswith("The answer is L")
    assert good.conversation[-1] == {"role": "assistant", "content": good.final_text, "generated": True}
    assert good.conversation[0]["role"] == "user" and not good.conversation[0]["generated"]
    assert good.score == 1.0 and good.score_basis == "coverage"
    assert good.input_tokens > 0 and good.output_tokens == len(good.final_text.split())
    bad = responses[("math-q1", "openai:cand-b[temp:0]")]
    # Required group: 3 should points at 0, 3 should_not points inverted to 1 -> 0.5.
    assert bad.score == 0.5 and bad.violated_should_not is False

    points = list(PointAssessment.objects.filter(response=good).order_by("position"))
    assert [(p.kind, p.inverted) for p in points] == [("function", False), ("judged", False), ("judged", False),
                                                      ("judged", True), ("judged", True), ("judged", True)]
    assert points[0].fn == "icontains" and points[0].fn_args == "L" and points[0].score == 1.0
    judged = points[3]
    assert judged.raw_score == 0.0 and judged.score == 1.0
    assert [v["judgeId"] for v in judged.verdicts] == ["holistic-judge-a(openai:judge-a)",
                                                       "holistic-judge-b(openai:judge-b)"]
    assert all(v["rawAnswers"] and v["reflection"] == "It does not do that." for v in judged.verdicts)
    assert judged.source_line is not None

    aggregates = run.aggregates
    assert aggregates["variants"]["openai:cand-a[temp:0]"]["mean"] == 1.0
    assert aggregates["variants"]["openai:cand-b[temp:0]"]["mean"] == 0.5
    assert aggregates["cells"]["cs-q1"]["openai:cand-b[temp:0]"] == 0.5
    assert aggregates["overall"]["mean"] == 0.75
    assert aggregates["agreement"]["points"] == 20  # every judged point had two judges

    # Every candidate item generated once, every judge verdict asked once.
    requests = fake_provider.requests()
    assert sum(1 for r in requests if r["model"].startswith("cand")) == 4
    assert sum(1 for r in requests if r["model"].startswith("judge")) == 40


def test_the_export_has_the_upstream_layout_and_our_extras_apart(fake_provider):
    script_candidates(fake_provider)
    run = run_start.start_run(corpus_blueprint(), models=["openai:cand-a", "openai:cand-b"],
                             judges=["openai:judge-a", "openai:judge-b"])
    data = run_to_json(Run.objects.get(pk=run.pk))
    scores = data["evaluationResults"]["llmCoverageScores"]
    entry = scores["math-q1"]["openai:cand-b[temp:0]"]
    assert entry["avgCoverageExtent"] == 0.5
    assert entry["pointAssessments"][0] == {"keyPointText": 'Function: icontains("L")', "coverageExtent": 0.0,
                                            "reflection": entry["pointAssessments"][0]["reflection"],
                                            "multiplier": 1.0, "isInverted": False}
    assert data["effectiveModels"] == ["IDEAL_BENCHMARK", "openai:cand-a[temp:0]", "openai:cand-b[temp:0]"] or \
        data["effectiveModels"] == ["openai:cand-a[temp:0]", "openai:cand-b[temp:0]", "IDEAL_BENCHMARK"]
    assert data["allFinalAssistantResponses"]["math-q1"]["IDEAL_BENCHMARK"] == "L"
    assert data["configId"] == "benchmarks__mmlu-pro" and data["runLabel"] == run.label
    assert set(data["evalsite"]) >= {"runId", "aggregates", "usage", "responses", "judges"}
    assert FAKE_KEY not in json.dumps(data)
    csv_text = run_to_csv(Run.objects.get(pk=run.pk))
    assert csv_text.splitlines()[0].startswith("run_id,prompt_id,model_id,trial")
    rows = list(csv.reader(io.StringIO(csv_text)))  # cells hold the prompt's and the response's texts, lines and all
    assert len(rows) == 1 + 4 * 6  # one row per point assessment (6 points a prompt)
    header = rows[0]
    assert header[-5:] == ["cell_score", "cell_state", "prompt_text", "response_text", "cell_passed"]
    assert rows[1][header.index("prompt_text")].startswith("user: ")


def test_an_override_changes_the_score_and_keeps_the_judges_verdict(fake_provider):
    script_candidates(fake_provider)
    run = run_start.start_run(corpus_blueprint(), models=["openai:cand-b"], judges=["openai:judge-a"])
    response = Response.objects.get(run=run, prompt_id="math-q1")
    point = PointAssessment.objects.get(response=response, position=0)
    PointOverride.objects.create(assessment=point, score=1.0, reason="the model said L in words", who="ada")
    data = run_to_json(Run.objects.get(pk=run.pk))
    entry = data["evaluationResults"]["llmCoverageScores"]["math-q1"]["openai:cand-b[temp:0]"]
    assert entry["avgCoverageExtent"] == round((1 + 0 + 0 + 1 + 1 + 1) / 6, 2)
    trial = data["evalsite"]["responses"]["math-q1"]["openai:cand-b[temp:0]"]["trials"][0]
    assert trial["judgedScore"] == 0.5 and trial["points"][0]["judgesScore"] == 0.0
    assert trial["points"][0]["override"]["reason"] == "the model said L in words"


def test_a_missing_key_fails_those_items_and_the_rest_complete(fake_provider):
    script_candidates(fake_provider)
    run = run_start.start_run(corpus_blueprint(), models=["openai:cand-a", "mistral:mistral-large"],
                             judges=["openai:judge-a"])
    run.refresh_from_db()
    assert run.status == "done"
    assert any("MISTRAL_API_KEY" in p for p in run.options["problems"])
    failed = Response.objects.filter(run=run, status="failed")
    assert failed.count() == 2 and all("MISTRAL_API_KEY" in r.error for r in failed)
    assert all(r.score is None for r in failed)
    assert Response.objects.filter(run=run, status="done").count() == 2
    assert run.aggregates["variants"]["mistral:mistral-large[temp:0]"]["mean"] is None


def test_a_duplicate_task_delivery_does_nothing(fake_provider):
    script_candidates(fake_provider)
    run = run_start.start_run(corpus_blueprint(), models=["openai:cand-a"], judges=["openai:judge-a"])
    before = len(fake_provider.requests())
    ids = list(Response.objects.filter(run=run).values_list("pk", flat=True))
    run_work.execute_chunk(run.pk, ids)
    assert len(fake_provider.requests()) == before


def test_cancel_keeps_finished_items_and_starts_nothing_new(fake_provider):
    script_candidates(fake_provider)
    run = run_start.start_run(corpus_blueprint(), models=["openai:cand-a", "openai:cand-b"],
                             judges=["openai:judge-a"], enqueue=False)
    first = list(Response.objects.filter(run=run).order_by("pk").values_list("pk", flat=True))[:1]
    run_work.execute_chunk(run.pk, first)
    run_work.cancel_run(run)
    run_work.execute_chunk(run.pk, list(Response.objects.filter(run=run).values_list("pk", flat=True)))
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert Response.objects.filter(run=run, status="done").count() == 1
    assert Response.objects.filter(run=run, status="pending").count() == 3
    assert sum(1 for r in fake_provider.requests() if r["model"].startswith("cand")) == 1


def test_retry_failed_reruns_only_what_ended_in_error(fake_provider):
    script_candidates(fake_provider)
    # The first call for this model is refused (401, not retried); the next one answers.
    run = run_start.start_run(corpus_blueprint(), models=["openai:cand-a", "openai:flaky-fail-401-then-ok"],
                             judges=["openai:judge-a"])
    run.refresh_from_db()
    assert run.items_failed == 1
    assert "401" in Response.objects.get(run=run, status="failed").error
    calls_before = len(fake_provider.requests())
    assert run_work.retry_failed(run) == 1
    run.refresh_from_db()
    assert run.status == "done" and run.items_failed == 0 and run.items_done == 4
    new_requests = fake_provider.requests()[calls_before:]
    assert [r["model"] for r in new_requests if not r["model"].startswith("judge")] == ["flaky-fail-401-then-ok"]


def test_a_blueprint_with_errors_or_an_unknown_collection_cannot_run():
    blueprint = Blueprint.objects.create(slug="broken", title="Broken")
    blueprint.save_revision("- prompt: hi\n  should:\n    - $contians: x\n")
    with pytest.raises(run_spec.RunRefused) as refused:
        run_start.start_run(blueprint)
    assert "broken:3:7: error: Unknown point function: 'contians'" in refused.value.problems[0]
    blueprint.save_revision("models: [NOPE]\n---\n- prompt: hi\n  should: [$contains: x]\n")
    with pytest.raises(run_spec.RunRefused) as refused:
        run_start.start_run(blueprint)
    assert "unknown model collection: NOPE" in refused.value.message
    assert Run.objects.count() == 0


def test_run_blueprint_runs_a_file_offline_and_exports_it(tmp_path, capsys):
    path = tmp_path / "demo.yml"
    path.write_text(
        "title: Demo\nmodels: [fixtures:demo]\nfixtures:\n  strategy: first\n  responses:\n"
        "    p1: {default: 'Paris is the capital of France.'}\n    p2: {default: 'I am not sure.'}\n---\n"
        "- id: p1\n  prompt: Capital of France?\n  should: [$icontains: paris]\n"
        "- id: p2\n  prompt: 2+2?\n  should: [$contains: '4']\n")
    out = tmp_path / "out.json"
    call_command("run_blueprint", str(path), "--json", str(out))
    captured = capsys.readouterr()
    assert "fixtures:demo[temp:0]  0.500" in captured.out
    data = json.loads(out.read_text())
    assert data["evaluationResults"]["llmCoverageScores"]["p1"]["fixtures:demo[temp:0]"]["avgCoverageExtent"] == 1.0
    run = Run.objects.get()
    call_command("export_run", str(run.pk), "--format", "csv", "--out", str(tmp_path / "out.csv"))
    assert (tmp_path / "out.csv").read_text().count("\n") == 3


@pytest.mark.parametrize("models, code", [("NOPE", 2), ("fixtures:demo", 0)])
def test_run_blueprint_exit_codes(tmp_path, models, code):
    path = tmp_path / "x.yml"
    path.write_text(f"models: [{models}]\nfixtures: {{responses: {{p: {{default: hi}}}}}}\n---\n"
                    "- id: p\n  prompt: q\n  should: [$contains: hi]\n")
    try:
        call_command("run_blueprint", str(path))
        got = 0
    except SystemExit as exc:
        got = exc.code
    assert got == code


def test_run_blueprint_enqueue_prints_the_run_id(tmp_path, capsys):
    path = tmp_path / "x.yml"
    path.write_text("models: [fixtures:x]\nfixtures: {responses: {p: {default: hi}}}\n---\n"
                    "- id: p\n  prompt: q\n  should: [$contains: hi]\n")
    call_command("run_blueprint", str(path), "--enqueue")
    run = Run.objects.get()
    assert capsys.readouterr().out.strip() == str(run.pk)
    run.refresh_from_db()
    assert run.status == "done"  # tests run tasks inline


def test_a_prompt_with_only_an_ideal_is_scored_by_similarity_with_an_embeddings_model(fake_provider, settings):
    settings.EVALSITE_EMBEDDINGS_MODEL = "openai:embed-small"
    fake_provider.script([{"model": "cand", "match": ".", "reply": "Paris is the capital of France."}])
    blueprint = Blueprint.objects.create(slug="ideal-only", title="Ideal only")
    blueprint.save_revision("models: [openai:cand-a]\n---\n- id: p\n  prompt: Capital of France?\n"
                            "  ideal: Paris is the capital of France.\n")
    run = run_start.start_run(blueprint)
    response = Response.objects.get(run=run)
    assert response.score_basis == "similarity" and response.score == 1.0
    assert response.similarity == pytest.approx(1.0)
    assert Run.objects.get(pk=run.pk).options["embeddingModel"] == "openai:embed-small"


def test_without_an_embeddings_model_an_ideal_only_prompt_is_not_evaluated_and_says_why(fake_provider, settings):
    settings.EVALSITE_EMBEDDINGS_MODEL = ""
    fake_provider.script([{"model": "cand", "match": ".", "reply": "Paris."}])
    blueprint = Blueprint.objects.create(slug="ideal-only", title="Ideal only")
    blueprint.save_revision("models: [openai:cand-a]\n---\n- id: p\n  prompt: Capital of France?\n  ideal: Paris.\n")
    run = run_start.start_run(blueprint)
    response = Response.objects.get(run=run)
    assert response.score is None and "EVALSITE_EMBEDDINGS_MODEL" in response.not_evaluated_reason


def test_each_item_stores_its_temperature_and_system_and_runs_with_them(fake_provider):
    fake_provider.script([{"model": "cand-a", "match": ".", "reply": "Paris."}, *judge_rules()])
    source = ("title: Variants\nmodels: [openai:cand-a]\ntemperatures: [0.2, 0.7]\nsystems: [Be brief., null]\n---\n"
              "- id: plain\n  prompt: Capital of France?\n  should: [$contains: Paris]\n"
              "- id: own-temp\n  prompt: Capital of Spain?\n  temperature: 0.5\n  should: [$contains: Madrid]\n")
    blueprint = import_files([("variants.yml", source, {})], via="test").items[0].blueprint
    run = run_start.start_run(blueprint, judges=["openai:judge-a"])
    run.refresh_from_db()
    assert run.status == "done", run.error
    rows = {(r.prompt_id, r.variant_id): r for r in Response.objects.filter(run=run)}
    assert len(rows) == 8  # 2 prompts x 2 temperatures x 2 systems (the list wins over a prompt's temperature)
    brief = rows[("plain", "openai:cand-a[temp:0.7][sp_idx:0]")]
    assert (brief.temperature, brief.system_index) == (0.7, 0)
    assert brief.conversation[0] == {"role": "system", "content": "Be brief.", "generated": False}
    own = rows[("own-temp", "openai:cand-a[temp:0.2][sp_idx:1]")]
    assert (own.temperature, own.system_index) == (0.2, 1) and own.conversation[0]["role"] == "user"
    sent = sorted(r["body"].get("temperature") for r in fake_provider.requests("cand-a"))
    assert sent == [0.2] * 4 + [0.7] * 4  # each item was sent at the temperature its row says
    variants = run.variants()
    assert all(r.variant_in(variants, run.prompt(r.prompt_index)).id_for(run.prompt(r.prompt_index)) == r.variant_id
               for r in rows.values())
    assert {r.temperature for r in rows.values()} == {0.2, 0.7}
    assert all(r.variant_index is not None for r in rows.values())


def test_retry_after_fixing_a_judge_asks_it_again_counts_each_item_once_and_keeps_time_true(fake_provider):
    from datetime import timedelta

    from django.utils import timezone

    # The judge answers nonsense for one criterion, twice (the answer and the repair): that verdict fails.
    fake_provider.script([{"model": "cand-a", "match": ".", "reply": "Paris, and it is short."},
                          {"model": "judge-a", "match": "(?s)<CRITERION>\nIs short", "reply": "I think it's fine!!"},
                          *judge_rules()])
    text = "title: Retry\nmodels: [openai:cand-a]\n---\n- id: fr\n  prompt: Capital of France?\n  should:\n" \
           "    - Names Paris\n    - Is short\n"
    blueprint = import_files([("retry.yml", text, {})], via="test").items[0].blueprint
    run = run_start.start_run(blueprint, judges=["openai:judge-a"])
    run.refresh_from_db()
    assert (run.items_done, run.items_failed, run.judge_calls_done, run.judge_calls_failed) == (1, 0, 1, 1)
    # An hour passes before anyone looks; the run took seconds, and still does after the retry.
    Run.objects.filter(pk=run.pk).update(started_at=F("started_at") - timedelta(hours=1),
                                         finished_at=F("started_at") - timedelta(hours=1) + timedelta(seconds=3))
    run.refresh_from_db()
    assert 2.5 < run.elapsed_s() < 3.5

    fake_provider.script([{"model": "cand-a", "match": ".", "reply": "Paris, and it is short."}, *judge_rules()],
                         replace=True)  # the judge is fixed
    asked = len(fake_provider.requests("judge-a"))
    assert run_work.retry_failed(run) == 1
    run.refresh_from_db()
    assert len(fake_provider.requests("judge-a")) > asked  # asked again: nothing unreadable came from the cache
    assert not [r for r in fake_provider.requests()[-4:] if r["model"] == "cand-a"]  # the answer was kept
    assert (run.items_total, run.items_done, run.items_failed) == (1, 1, 0)
    assert (run.judge_calls_done, run.judge_calls_failed) == (2, 0)
    assert Response.objects.get(run=run).score == 1.0
    assert run.elapsed_s() < 60  # 3 s, plus the retry's own seconds; never the hour in between
    assert (timezone.now() - run.started_at).total_seconds() > 3600
