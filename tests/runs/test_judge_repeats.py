"""Judge repeats through every door (the command, the API, the run form) against the fake LLM server: the
re-askings are stored, the score is the first asking's, and the flip rate shows on the run page, the
response page, the judges page and in the API; the estimate counts every asking."""

from __future__ import annotations

import io
import json
import re
from html import unescape

import pytest
from django.core.management import call_command

from blueprints.importing import import_files
from runs import start as run_start
from runs.models import PointAssessment, Response, Run
from runs.replay import replay_run

from .conftest import judge_rules

pytestmark = pytest.mark.django_db(transaction=True)

BLUEPRINT = """title: Flips
models: [openai:cand]
---
- id: capital
  prompt: What is the capital of France?
  should:
    - Names Paris
    - Mentions the Seine
    - $contains: Paris
- id: sum
  prompt: What is 2 + 2?
  should:
    - Gives the sum
"""
CANDIDATE = [{"model": "cand", "match": "capital", "reply": "Paris, on the Seine."},
             {"model": "cand", "match": "2 \\+ 2", "reply": "4"}]
SEINE_UNMET = {"model": "judge", "match": r"(?s)<CRITERION>\nMentions the Seine",
               "reply": "<reflection>No river is named.</reflection><classification>CLASS_UNMET</classification>"}


def run_command(path, *args) -> Run:
    call_command("run_blueprint", str(path), "--judges", "openai:judge", *args, stdout=io.StringIO(),
                 stderr=io.StringIO())
    return Run.objects.order_by("-pk").first()


def post(client, url, body):
    return client.post(url, data=json.dumps(body), content_type="application/json")


def text_of(response) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


@pytest.fixture
def asked_once_then_thrice(fake_provider, tmp_path):
    """A run asking once (every judge says met), then the same run asking three times, where the judge now
    says the Seine is not mentioned: the first askings come from the cache, only the re-askings change."""
    path = tmp_path / "flips.yml"
    path.write_text(BLUEPRINT)
    fake_provider.script([*CANDIDATE, *judge_rules()])
    once = run_command(path)
    fake_provider.script([*CANDIDATE, SEINE_UNMET, *judge_rules()])
    sent_before = len(fake_provider.requests("judge"))
    thrice = run_command(path, "--judge-repeats", "3")
    return once, thrice, len(fake_provider.requests("judge")) - sent_before


def test_the_command_stores_every_asking_and_scores_from_the_first(asked_once_then_thrice):
    once, thrice, judge_calls_sent = asked_once_then_thrice

    assert once.status == thrice.status == "done"
    assert "repeats" not in once.judges and once.manifest["judges"]["repeats"] == 1
    assert thrice.judges["repeats"] == 3 and thrice.manifest["judges"]["repeats"] == 3
    # 3 judged points, their first askings from the cache: 2 re-askings each went to the judge.
    assert judge_calls_sent == 3 * 2
    # The score is the first asking's: the same as the run that asked once, response by response.
    scores = lambda run: sorted(Response.objects.filter(run=run).values_list("prompt_id", "score"))  # noqa: E731
    assert scores(thrice) == scores(once) == [("capital", 1.0), ("sum", 1.0)]
    figures = lambda run: {k: (v["mean"], v["n"], v["disagreements"]) for k, v in  # noqa: E731
                           run.aggregates["variants"].items()}
    assert figures(thrice) == figures(once) == {"openai:cand[temp:0]": (1.0, 2, 0)}
    assert thrice.aggregates["agreement"] == once.aggregates["agreement"]
    assert thrice.aggregates["cells"] == once.aggregates["cells"]
    # The judge counters count first askings; the usage counts every call.
    assert (thrice.judge_calls_total, thrice.judge_calls_done) == (once.judge_calls_total, once.judge_calls_done) \
        == (3, 3)
    assert sum(r.judge_usage["calls"] for r in Response.objects.filter(run=thrice)) == 9

    seine = PointAssessment.objects.get(response__run=thrice, text="Mentions the Seine")
    assert seine.score == 1.0
    assert [(v["role"], v.get("repeat", 0), v["label"], v["cached"]) for v in seine.verdicts] == [
        ("primary", 0, "CLASS_EXACTLY_MET", True), ("repeat", 1, "CLASS_UNMET", False),
        ("repeat", 2, "CLASS_UNMET", False)]


def test_the_run_page_the_response_page_and_the_api_show_the_flips(asked_once_then_thrice, client):
    once, thrice, _ = asked_once_then_thrice

    page = text_of(client.get(f"/runs/{thrice.pk}/"))
    assert "Judge re-asked 3 times: 33% of judged points flipped (1 of 3)" in page
    assert "holistic-judge(openai:judge) 33% 1 of 3" in page  # the per-judge row
    assert "Judge flip rate" not in text_of(client.get(f"/runs/{once.pk}/"))

    seine = Response.objects.get(run=thrice, prompt_id="capital")
    shown = text_of(client.get(f"/runs/{thrice.pk}/responses/{seine.pk}/"))
    assert shown.count("⟲ judge flipped") == 1
    assert ("1. CLASS_EXACTLY_MET 1.00 · 2. CLASS_UNMET 0.00 · 3. CLASS_UNMET 0.00 flipped (spread 1.00)"
            in shown)
    assert "1. CLASS_EXACTLY_MET 1.00 · 2. CLASS_EXACTLY_MET 1.00 · 3. CLASS_EXACTLY_MET 1.00 same every time" \
        in shown
    assert "The score comes from the first asking." in shown
    other = Response.objects.get(run=thrice, prompt_id="sum")
    assert "⟲ judge flipped" not in text_of(client.get(f"/runs/{thrice.pk}/responses/{other.pk}/"))

    status = client.get(f"/api/runs/{thrice.pk}").json()
    assert status["judgeRepeats"] == 3
    assert status["judgeFlips"]["points"] == {"flipped": 1, "n": 3, "rate": 0.3333, "meanSpread": 0.3333,
                                              "maxSpread": 1.0}
    assert status["judgeFlips"]["judges"] == [{"judgeId": "holistic-judge(openai:judge)", "model": "openai:judge",
                                               "flipped": 1, "n": 3, "rate": 0.3333, "meanSpread": 0.3333,
                                               "maxSpread": 1.0}]
    asked_once = client.get(f"/api/runs/{once.pk}").json()
    assert (asked_once["judgeRepeats"], asked_once["judgeFlips"]) == (1, None)

    judges = text_of(client.get("/judges/"))
    assert "Judge re-asked up to 3 times: 33% of judged points flipped (1 of 3, in 1 run)" in judges


def test_a_replay_asks_as_often_and_finds_each_asking_under_its_own_key(asked_once_then_thrice, fake_provider):
    _, thrice, _ = asked_once_then_thrice
    sent = len(fake_provider.requests())

    replay = replay_run(thrice)

    assert replay.status == "done" and len(fake_provider.requests()) == sent
    assert replay.judges["repeats"] == 3
    seine = PointAssessment.objects.get(response__run=replay, text="Mentions the Seine")
    assert [v["label"] for v in seine.verdicts] == ["CLASS_EXACTLY_MET", "CLASS_UNMET", "CLASS_UNMET"]


@pytest.mark.parametrize("value", ["0", "6", "x"])
def test_the_command_refuses_judge_repeats_outside_1_to_5(value, tmp_path):
    path = tmp_path / "flips.yml"
    path.write_text(BLUEPRINT)
    err = io.StringIO()
    with pytest.raises(SystemExit) as exit_code:
        call_command("run_blueprint", str(path), "--judge-repeats", value, stderr=err)
    assert exit_code.value.code == 2 and "--judge-repeats must be a whole number from 1 to 5" in err.getvalue()
    assert not Run.objects.exists()


def test_start_run_refuses_judge_repeats_outside_1_to_5():
    blueprint = import_files([("flips.yml", BLUEPRINT, {})], via="test").items[0].blueprint
    with pytest.raises(run_start.RunRefused, match="judge repeats is a whole number from 1 to 5, not 9"):
        run_start.start_run(blueprint, judges=["openai:judge"], judge_repeats=9)
    assert not Run.objects.exists()


def test_the_api_starts_a_run_with_judge_repeats(client, fake_provider):
    fake_provider.script([*CANDIDATE, *judge_rules()])

    response = post(client, "/api/runs", {"blueprint": BLUEPRINT, "judges": ["openai:judge"], "judgeRepeats": 2})

    assert response.status_code == 201, response.content
    data = response.json()
    assert data["status"] == "done" and data["judgeRepeats"] == 2
    assert data["judgeFlips"]["points"] == {"flipped": 0, "n": 3, "rate": 0.0, "meanSpread": 0.0, "maxSpread": 0.0}
    assert len(fake_provider.requests("judge")) == 3 * 2
    assert Run.objects.get(pk=data["id"]).judges["repeats"] == 2


@pytest.mark.parametrize("value", [0, 6, "3", True, 2.5, [2], None])
def test_the_api_refuses_judge_repeats_outside_1_to_5(client, value):
    response = post(client, "/api/runs", {"blueprint": BLUEPRINT, "judgeRepeats": value})
    if value is None:  # not sent: asked once
        assert response.status_code in (201, 422)
        return
    assert response.status_code == 400
    assert response.json()["error"].startswith("`judgeRepeats` must be a whole number from 1 to 5")
    assert not Run.objects.exists()


def test_the_estimate_counts_every_asking_from_each_door(client, fake_provider, tmp_path):
    blueprint = import_files([("flips.yml", BLUEPRINT, {})], via="test").items[0].blueprint

    def judge_calls(**kwargs):
        planned = run_start.plan_start(blueprint, judges=["openai:judge"], **kwargs)
        return run_start.estimate_start(planned, fresh=True).judge_calls

    assert judge_calls() == judge_calls(judge_repeats=1) == 3
    assert judge_calls(judge_repeats=4) == 12

    dry = post(client, "/api/runs", {"blueprintId": blueprint.slug, "judges": ["openai:judge"], "dryRun": True,
                                     "judgeRepeats": 3}).json()
    assert dry["calls"]["judge"] == 9

    out = tmp_path / "estimate.json"
    path = tmp_path / "flips.yml"
    path.write_text(BLUEPRINT)
    call_command("run_blueprint", str(path), "--judges", "openai:judge", "--dry-run", "--judge-repeats", "5",
                 "--json", str(out), stdout=io.StringIO(), stderr=io.StringIO())
    assert json.loads(out.read_text())["calls"]["judge"] == 15

    # What the estimate says is what the run sends.
    fake_provider.script([*CANDIDATE, *judge_rules()])
    run = run_start.start_run(blueprint, judges=["openai:judge"], judge_repeats=4, fresh=True)
    run.refresh_from_db()
    assert run.status == "done" and len(fake_provider.requests("judge")) == 12


def test_the_run_form_estimate_follows_judge_repeats_and_the_form_starts_with_it(client, fake_provider, settings):
    settings.EVALSITE_DEFAULT_JUDGES = ["openai:judge"]
    blueprint = import_files([("flips.yml", BLUEPRINT, {})], via="test").items[0].blueprint
    base = {"blueprint": blueprint.slug, "models_offered": ["openai:cand"], "models": ["openai:cand"]}

    def judge_calls(**extra):
        fragment = client.post(f"/runs/form/{blueprint.slug}/", {**base, **extra},
                               HTTP_HX_REQUEST="true").content.decode()
        found = re.search(r'class="estimate-judge-calls">(\d+)<', fragment)
        return int(found.group(1)) if found else unescape(fragment)

    once, thrice = judge_calls(), judge_calls(judge_repeats="3")
    assert (once, thrice) == (3, 9)
    assert "Judge repeats must be a whole number from 1 to 5" in judge_calls(judge_repeats="6")
    page = client.get(f"/runs/form/{blueprint.slug}/").content.decode()
    assert 'name="judge_repeats"' in page and "Judge repeats" in page

    fake_provider.script([*CANDIDATE, *judge_rules()])
    client.post("/runs/start", {**base, "judge_repeats": "2"})
    run = Run.objects.get()
    assert run.judges["repeats"] == 2 and run.status == "done"
    assert len(fake_provider.requests("judge")) == 3 * 2
    refused = client.post("/runs/start", {**base, "judge_repeats": "9"}, follow=True)
    assert "Judge repeats must be a whole number from 1 to 5" in unescape(refused.content.decode())
    assert Run.objects.count() == 1


def test_the_exports_and_the_report_say_which_asking_each_verdict_is(asked_once_then_thrice):
    from runs.exports import run_to_csv, run_to_json
    from runs.report import report_chunks

    once, thrice, _ = asked_once_then_thrice

    csv_text = run_to_csv(thrice)
    assert "holistic-judge(openai:judge)=1.0; holistic-judge(openai:judge) (asking 2)=0.0; " \
           "holistic-judge(openai:judge) (asking 3)=0.0" in csv_text
    assert "(asking" not in run_to_csv(once)
    def judges(run):  # evalsite.responses: {prompt: {variant: {"trials": [{..., "points": [...]}]}}}
        return [j for variants in run_to_json(run)["evalsite"]["responses"].values() for cell in variants.values()
                for trial in cell["trials"] for p in trial["points"] for j in p["judges"]]

    assert sorted(j.get("repeat", 0) for j in judges(thrice)) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert len(judges(once)) == 3 and all("repeat" not in j for j in judges(once))
    report = "".join(report_chunks(thrice))
    assert report.count("holistic-judge(openai:judge) (asking 3)") == 3


@pytest.mark.parametrize("sent", ["9" * 5000, "x" * 100_000, "4000"])
def test_a_hostile_judge_repeats_value_is_refused_in_a_short_message(sent):
    with pytest.raises(ValueError) as refused:
        run_start.check_judge_repeats(sent)
    assert str(refused.value).startswith("judge repeats is a whole number from 1 to 5, not ")
    assert len(str(refused.value)) < 120
