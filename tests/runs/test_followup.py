"""A follow-up run that settles a "can't tell" (runs/followup.py, ``manage.py followup``), through the command, on
runs made through the production path against the fake LLM server (a price file of the test's own)."""

from __future__ import annotations

import io
import json

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

A, B = "openai:cand-a[temp:0]", "openai:cand-b[temp:0]"
PROMPTS = 8
TEXT = ("title: Follow\nmodels: [openai:cand-a, openai:cand-b]\n---\n"
        + "".join(f"- id: q{i}\n  prompt: Question number {i}?\n  should:\n    - $contains: GOOD\n"
                  f"    - $contains: FINE\n" for i in range(PROMPTS)))


@pytest.fixture
def priced(tmp_path, monkeypatch):
    table = tmp_path / "prices.json"
    table.write_text(json.dumps({"models": {m: {"input": 1.0, "output": 2.0, "as_of": "2026-01-01"}
                                            for m in ("openai:cand-a", "openai:cand-b")}}))
    monkeypatch.setattr(engine_prices, "PRICES_FILE", table)


def command(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("followup", *[str(a) for a in args], stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


def _original(fake_provider):
    """cand-a answers GOOD FINE to every prompt; cand-b the same but only GOOD to prompts 1 and 4 (0.5 there):
    a difference on 2 of 8 prompts, too few to tell."""
    blueprint = import_files([("follow.yml", TEXT, {})], via="test").items[0].blueprint
    fake_provider.script([{"model": "cand-b", "match": r"Question number (1|4)\b", "reply": "GOOD only"},
                          {"model": "cand-a", "match": ".", "reply": "GOOD FINE answer"},
                          {"model": "cand-b", "match": ".", "reply": "GOOD FINE answer"}])
    run = run_start.start_run(blueprint, fresh=True)
    run.refresh_from_db()
    assert run.status == "done"
    return run


def test_a_dry_run_names_the_prompts_the_answers_calls_and_costs_and_starts_nothing(fake_provider, priced,
                                                                                      tmp_path):
    run = _original(fake_provider)
    out_file = tmp_path / "plan.json"
    code, out, err = command(run.pk, "--a", A, "--b", B, "--dry-run", "--json", out_file)
    assert code == 0, err
    data = json.loads(out_file.read_text())["suggestion"]
    assert data["original"]["verdict"] == "cant_tell"
    assert data["prompts"] == ["q1", "q4"]  # only where the two disagreed
    plan = sequential.plan({"q1": 0.5, "q4": 0.5}, 0.125)
    assert (data["trials"], data["answers"]) == (plan.trials, plan.answers)
    assert data["calls"] == 2 * data["answers"]  # one generation per answer of each model, no judge
    assert data["costExpectedUsd"] is not None and data["costMostUsd"] >= data["costExpectedUsd"]
    assert "To settle it, ask 2 prompts where the two disagree most again" in out
    assert Run.objects.count() == 1


def test_the_follow_up_is_a_run_of_those_prompts_that_stops_once_decided_and_says_so(fake_provider, priced,
                                                                                     tmp_path):
    run = _original(fake_provider)
    before = len(fake_provider.requests())
    code, out, err = command(run.pk, "--a", A, "--b", B, "--json", tmp_path / "out.json")
    assert code == 0, err
    data = json.loads((tmp_path / "out.json").read_text())
    follow = Run.objects.get(pk=data["followup"]["run"])
    assert follow.options["followupOf"] == run.pk and follow.options["followupPair"] == {"a": A, "b": B}
    assert follow.options["fresh"] is True
    rows = Response.objects.filter(run=follow)
    assert set(rows.values_list("prompt_id", flat=True)) == {"q1", "q4"}
    assert set(rows.values_list("variant_id", flat=True)) == {A, B}
    # The two differ by 0.5 on every answer: the sequence decides "better"; the verdict is its own results'.
    result = followup.verdict(follow)
    diffs = followup.paired_differences(follow)
    assert diffs and all(d == 0.5 for d in diffs)
    assert result.verdict == "better" and data["followup"]["verdict"]["verdict"] == "better"
    assert result.low == pytest.approx(sequential.sequence(diffs)[0][-1])
    assert "Follow-up verdict: better" in out
    if follow.status == "cancelled":  # stopped by itself, once decided, before every answer came
        assert follow.stopped_reason == followup.STOP_REASON and "decided after" in follow.stopped_detail
    made = len(fake_provider.requests()) - before
    assert made <= data["suggestion"]["calls"]  # it may stop before asking everything


def test_a_budget_caps_the_follow_up(fake_provider, priced):
    run = _original(fake_provider)
    follow, found = followup.start(run, A, B, budget_usd=0.5, enqueue=False)
    assert follow.budget_usd == 0.5 and follow.items_total == 2 * found.answers
    assert follow.options["followupPlan"]["calls"] == found.calls


def test_bad_input_names_the_place_and_the_fix(fake_provider, priced):
    run = _original(fake_provider)
    code, _, err = command(run.pk, "--a", "openai:nope", "--b", B, "--dry-run")
    assert code == 2 and "has no model variant 'openai:nope'" in err and A in err
    code, _, err = command(run.pk, "--a", A, "--b", A, "--dry-run")
    assert code == 2 and "the same" in err
    code, _, err = command(run.pk, "--a", A, "--b", B, "--budget", "-3")
    assert code == 2 and "--budget" in err
    code, _, err = command(987654, "--a", A, "--b", B)
    assert code == 2 and "no run 987654" in err


def test_one_click_on_the_compare_page_starts_it_and_the_run_pages_link_the_two(fake_provider, priced, client):
    import re
    from html import unescape

    run = _original(fake_provider)
    html = client.get(f"/runs/{run.pk}/compare").content.decode()
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())
    found = followup.suggest(run, A, B)
    assert found.line in text and 'action="/runs/%d/followup"' % run.pk in html
    answer = client.post(f"/runs/{run.pk}/followup", {"a": A, "b": B, "budget_usd": "-2"}, follow=True)
    assert "the budget is a number of US dollars above 0" in answer.content.decode() and Run.objects.count() == 1
    answer = client.post(f"/runs/{run.pk}/followup", {"a": A, "b": B, "budget_usd": ""})
    follow = Run.objects.exclude(pk=run.pk).get()
    assert answer.status_code == 302 and answer["Location"] == f"/runs/{follow.pk}/"
    assert follow.budget_usd is None and follow.source == "web"  # the budget a test can run: test_a_budget_caps
    page = " ".join(unescape(re.sub(r"<[^>]+>", " ", client.get(f"/runs/{follow.pk}/").content.decode())).split())
    result = followup.verdict(follow)
    assert f"Follow-up of run {run.pk}" in page and f"after {result.n} paired answers" in page
    original = client.get(f"/runs/{run.pk}/").content.decode()
    assert f'href="/runs/{follow.pk}/"' in original and "Follow-ups of this run" in original
    # an empty or unknown choice is refused with its reason, never read as "every variant"
    answer = client.post(f"/runs/{run.pk}/followup", {"a": "", "b": B}, follow=True)
    assert "has no model variant" in answer.content.decode() and Run.objects.count() == 2


def test_a_large_follow_up_needs_a_budget_to_start_with_one_click(fake_provider, priced, client, settings):
    run = _original(fake_provider)
    settings.EVALSITE_CONFIRM_CALLS = 10
    answer = client.post(f"/runs/{run.pk}/followup", {"a": A, "b": B}, follow=True)
    assert "set a budget under $5 to start it with one click" in answer.content.decode()
    assert Run.objects.count() == 1


def test_the_suggestion_reads_the_pairs_figures_the_compare_page_shows_either_way_round(fake_provider, priced):
    from runs import compare as run_compare

    run = _original(fake_provider)
    (pair,) = run_compare.decisions(run).pairs
    assert (pair.a, pair.b) == (A, B)
    ab, ba = followup.suggest(run, A, B), followup.suggest(run, B, A)
    assert (ab.comparison.delta, ab.comparison.low, ab.comparison.verdict) == (pair.delta, pair.low, pair.verdict)
    assert (ba.comparison.delta, ba.comparison.low, ba.comparison.high) == (-pair.delta, -pair.high, -pair.low)
    assert ba.plan.prompts == ab.plan.prompts and ba.calls == ab.calls


def test_the_history_links_a_follow_up_to_its_run(fake_provider, priced, client):
    run = _original(fake_provider)
    follow, _ = followup.start(run, A, B)
    history = client.get(f"/runs/history/{run.blueprint.slug}").content.decode()
    assert f'follow-up of <a href="#run-{run.pk}">run {run.pk}</a>' in history
    assert f'follow-up: <a href="#run-{follow.pk}">run {follow.pk}</a>' in history
    assert f'id="run-{run.pk}"' in history and f'id="run-{follow.pk}"' in history
    assert followup.links(run.blueprint_id) == ({follow.pk: run.pk}, {run.pk: [follow.pk]})
    # a follow-up's means are of a few prompts: the trend lines leave it out, the table keeps it
    from runs.across import figures

    history_figures = figures.history(run.blueprint)
    assert [i.summary is not None for i in history_figures.runs if i.pk == follow.pk] == [True]  # it has means
    on_trends = {p.run_id for points in history_figures.trends.values() for p in points}
    assert run.pk in on_trends and follow.pk not in on_trends
