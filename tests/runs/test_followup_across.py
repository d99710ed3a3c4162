"""A follow-up for a model across two runs (``manage.py followup RUN --baseline OTHER --model VARIANT``, the compare
page between two runs): the variant asked again under each run's conditions, on runs made through the production
path against the fake LLM server. Here the two runs differ in their judge: judge-a (the base's) finds two answers
only partly good, judge-b (the run's) finds every answer good."""

from __future__ import annotations

import io
import json
import re
from html import unescape

import pytest
from django.core.management import call_command

from blueprints.importing import import_files
from runs import followup
from runs import start as run_start
from runs.engine import sequential
from runs.engine.providers import prices as engine_prices
from runs.models import Response, Run
from tests.fakes.pytest_fixtures import fake_llm, fake_llm_server, fake_provider  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

V = "openai:cand-a[temp:0]"
PROMPTS = 8
TEXT = ("title: Across\nmodels: [openai:cand-a]\n---\n"
        + "".join(f"- id: q{i}\n  prompt: Question number {i}?\n  should:\n    - Answers the question well\n"
                  for i in range(PROMPTS)))


@pytest.fixture
def priced(tmp_path, monkeypatch):
    table = tmp_path / "prices.json"
    table.write_text(json.dumps({"models": {m: {"input": 1.0, "output": 2.0, "as_of": "2026-01-01"}
                                            for m in ("openai:cand-a", "openai:judge-a", "openai:judge-b")}}))
    monkeypatch.setattr(engine_prices, "PRICES_FILE", table)


def _judge(model: str, text: str, label: str) -> dict:
    return {"model": model, "match": rf"(?s)<TEXT>\n{text}",
            "reply": f"<reflection>So.</reflection><classification>{label}</classification>"}


def command(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("followup", *[str(a) for a in args], stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


def _runs(fake_provider) -> tuple[Run, Run]:
    blueprint = import_files([("across.yml", TEXT, {})], via="test").items[0].blueprint
    fake_provider.script([{"model": "cand-a", "match": r"Question number (1|4)\b", "reply": "ALPHA slow"},
                          {"model": "cand-a", "match": ".", "reply": "ALPHA answer"},
                          _judge("judge-a", "ALPHA slow", "CLASS_PARTIALLY_MET"),
                          _judge("judge-a", "ALPHA", "CLASS_EXACTLY_MET"),
                          _judge("judge-b", "ALPHA", "CLASS_EXACTLY_MET")])
    base = run_start.start_run(blueprint, judges=["openai:judge-a"], fresh=True)
    run = run_start.start_run(blueprint, judges=["openai:judge-b"], fresh=True)
    for r in (base, run):
        r.refresh_from_db()
        assert r.status == "done"
    return run, base


def _text(html: str) -> str:
    return re.sub(r" ([:;,.])", r"\1", " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split()))


def test_a_dry_run_across_two_runs_prices_both_sides_and_starts_nothing(fake_provider, priced, tmp_path):
    run, base = _runs(fake_provider)
    code, out, err = command(run.pk, "--baseline", base.pk, "--model", V, "--dry-run", "--json", tmp_path / "p.json")
    assert code == 0, err
    data = json.loads((tmp_path / "p.json").read_text())["suggestion"]
    assert (data["run"], data["base"], data["a"], data["b"]) == (run.pk, base.pk, V, V)
    assert data["original"]["verdict"] == "cant_tell"
    assert data["prompts"] == ["q1", "q4"]
    diff = data["disagreement"]["q1"]
    assert diff > 0 and data["disagreement"]["q4"] == diff
    plan = sequential.plan({"q1": diff, "q4": diff}, data["original"]["delta"])
    assert (data["trials"], data["answers"]) == (plan.trials, plan.answers)
    assert data["calls"] == 2 * 2 * data["answers"]  # each side: one answer and one judge call per answer
    assert data["costExpectedUsd"] is not None and data["costMostUsd"] >= data["costExpectedUsd"]
    assert f"To settle it, ask {V} 2 prompts where run {run.pk} and run {base.pk} disagree most again" in out
    assert Run.objects.count() == 2


def test_the_follow_up_is_two_linked_runs_that_decide_from_their_own_answers(fake_provider, priced, tmp_path, client):
    run, base = _runs(fake_provider)
    before = len(fake_provider.requests())
    code, out, err = command(run.pk, "--baseline", base.pk, "--model", V, "--budget", "2", "--json",
                             tmp_path / "out.json")
    assert code == 0, err
    data = json.loads((tmp_path / "out.json").read_text())
    mine, theirs = Run.objects.get(pk=data["followup"]["run"]), Run.objects.get(pk=data["followup"]["baseRun"])
    assert mine.options["followupOf"] == run.pk and theirs.options["followupOf"] == base.pk
    assert mine.options["followupPartner"] == theirs.pk and theirs.options["followupPartner"] == mine.pk
    assert mine.options["followupPair"] == theirs.options["followupPair"] == {"a": V, "b": V, "aRun": run.pk,
                                                                              "bRun": base.pk}
    assert mine.options["requestedJudges"] == ["openai:judge-b"]  # each side under its own run's judges
    assert theirs.options["requestedJudges"] == ["openai:judge-a"]
    assert mine.budget_usd == theirs.budget_usd == 1.0  # the budget split evenly
    for side in (mine, theirs):
        assert set(Response.objects.filter(run=side).values_list("prompt_id", flat=True)) == {"q1", "q4"}
    # judge-b finds every answer good, judge-a the same answers only partly: a constant difference decides
    diffs = followup.paired_differences(mine)
    assert diffs and len(set(diffs)) == 1 and diffs[0] > 0
    assert followup.paired_differences(theirs) == diffs  # either side reads the same pairs
    assert followup.verdict(mine).verdict == followup.verdict(theirs).verdict == "better"
    assert data["followup"]["verdict"]["verdict"] == "better" and "Follow-up verdict: better" in out
    made = len(fake_provider.requests()) - before
    assert 0 < made <= data["suggestion"]["calls"]
    # the run pages link them: the follow-up names its run and its partner, the original lists its follow-up
    page = client.get(f"/runs/{mine.pk}/").content.decode()
    assert f'href="/runs/{theirs.pk}/"' in page
    assert f"Follow-up of run {run.pk}:" in _text(page) and f"{V} better in run {run.pk}" in _text(page)
    original = _text(client.get(f"/runs/{run.pk}/").content.decode())
    assert f"Run {mine.pk}: {V} in run {run.pk} against run {base.pk}" in original
    assert f"Run {theirs.pk}: {V} in run {run.pk} against run {base.pk}" in _text(
        client.get(f"/runs/{base.pk}/").content.decode())
    # the blueprint's history links each follow-up to its run, and each run to its follow-ups
    history = client.get(f"/runs/history/{run.blueprint.slug}").content.decode()
    assert f'follow-up of <a href="#run-{run.pk}">run {run.pk}</a>' in history
    assert f'follow-up of <a href="#run-{base.pk}">run {base.pk}</a>' in history
    assert f'follow-up: <a href="#run-{mine.pk}">run {mine.pk}</a>' in history
    assert f'follow-up: <a href="#run-{theirs.pk}">run {theirs.pk}</a>' in history


def test_two_runs_that_differ_only_in_when_they_ran_are_refused_with_the_reason(fake_provider, priced):
    run, base = _runs(fake_provider)
    again = run_start.start_run(base.blueprint, judges=["openai:judge-a"], fresh=True)
    code, _, err = command(again.pk, "--baseline", base.pk, "--model", V, "--dry-run")
    assert code == 2 and "same blueprint revision and the same judges" in err and "only when they ran differs" in err


def test_bad_flags_name_the_place_and_the_fix(fake_provider, priced):
    run, base = _runs(fake_provider)
    for args in (("--a", V, "--model", V), ("--baseline", base.pk), ("--model", V), ("--a", V), ()):
        code, _, err = command(run.pk, *args, "--dry-run")
        assert code == 2 and "name one pair: --a VARIANT --b VARIANT" in err, args
    code, _, err = command(run.pk, "--baseline", 987654, "--model", V, "--dry-run")
    assert code == 2 and "--baseline: no run 987654" in err
    code, _, err = command(run.pk, "--baseline", base.pk, "--model", "openai:nope", "--dry-run")
    assert code == 2 and "'openai:nope' is not in both" in err and V in err
    code, _, err = command(run.pk, "--baseline", run.pk, "--model", V, "--dry-run")
    assert code == 2 and "--baseline is RUN itself" in err


def test_the_compare_page_between_two_runs_offers_the_follow_up_and_one_click_starts_it(fake_provider, priced,
                                                                                       client):
    run, base = _runs(fake_provider)
    page = _text(client.get(f"/runs/{run.pk}/compare?with={base.pk}").content.decode())
    assert f"{V} in run {run.pk} against run {base.pk}: To settle it, ask {V} 2 prompts" in page
    # bad input: a base that is no run id, or no run, goes back to the page with the reason
    answer = client.post(f"/runs/{run.pk}/followup", {"a": V, "b": V, "base": "x1", "budget_usd": ""}, follow=True)
    assert "Cannot start the follow-up: `base` must be a run id, not &#x27;x1&#x27;." in answer.content.decode()
    assert answer.redirect_chain[-1][0] == f"/runs/{run.pk}/compare"
    answer = client.post(f"/runs/{run.pk}/followup", {"a": V, "b": V, "base": "987654"}, follow=True)
    assert "no run 987654" in answer.content.decode()
    assert answer.redirect_chain[-1][0] == f"/runs/{run.pk}/compare?with=987654"
    assert Run.objects.count() == 2
    answer = client.post(f"/runs/{run.pk}/followup", {"a": V, "b": V, "base": str(base.pk), "budget_usd": "1"})
    mine = Run.objects.get(options__followupOf=run.pk)
    theirs = Run.objects.get(options__followupOf=base.pk)
    assert answer.status_code == 302 and answer["Location"] == f"/runs/{mine.pk}/"
    assert mine.options["followupPartner"] == theirs.pk and mine.budget_usd == 0.5
    assert mine.source == theirs.source == "web"


def test_no_follow_up_is_offered_between_two_runs_that_differ_only_in_when_they_ran(fake_provider, priced, client):
    run, base = _runs(fake_provider)
    again = run_start.start_run(base.blueprint, judges=["openai:judge-a"], fresh=True)
    page = client.get(f"/runs/{again.pk}/compare?with={base.pk}").content.decode()
    assert "can&#x27;t tell" in page or "can't tell" in page
    assert "followup-suggestion" not in page


def test_the_suggestion_reads_the_runs_stored_cells_not_their_matrices(fake_provider, priced, monkeypatch):
    """Compare's first view asks for the suggestion on a "can't tell" pair: it reads each finished run's stored
    cell figures (both runs' whole matrices took seconds at 100,000 responses), and its scores are the matrices'."""
    from runs import records
    from runs.compare import scores_by_variant
    from runs.spec import parsed_blueprint

    run, base = _runs(fake_provider)
    expected = {r.pk: scores_by_variant(records.run_matrix(r, parsed_blueprint(r.revision).prompts))[V]
                for r in (run, base)}
    assert {r.pk: followup._variant_scores(r, parsed_blueprint(r.revision).prompts, V) for r in (run, base)} \
        == expected
    assert expected[base.pk]["q1"] < expected[run.pk]["q1"]  # the two runs' judges disagree there
    records.forget_matrix()
    built = []
    real = records.build_matrix
    monkeypatch.setattr(records, "build_matrix", lambda *a, **k: built.append(1) or real(*a, **k))
    found = followup.suggest_across(run, base, V)
    assert found.plan.prompts == ["q1", "q4"] and built == []
