"""A run's budget: no call leaves once spent + in flight + its estimate would pass the cap; the run stops as
cancelled with the reason "budget", keeps what ran, and resumes with a higher cap. Against the fake LLM server
(its usage counts words), with prices for the fake models from a price file of the test's own."""

from __future__ import annotations

import asyncio
import json

import pytest

from blueprints.importing import import_files
from runs import actions
from runs import start as run_start
from runs.engine.pipeline import BudgetGuard
from runs.engine.providers import prices as engine_prices
from runs.models import Response, Run
from runs.spec import RunRefused

pytestmark = pytest.mark.django_db(transaction=True)

PROMPTS = 8
TEXT = "title: Budget\nmodels: [openai:cand-priced]\n---\n" + "".join(
    f"- id: q{i}\n  prompt: Question number {i}?\n  should:\n    - $contains: Echo\n" for i in range(PROMPTS))
PER_TOKEN = 0.001  # $1000 per million tokens, in and out
# Each call is counted before it leaves as (18 characters / 4 -> 5 tokens in) + 1500 tokens out = $1.505;
# it costs 3 words in + 4 words out ("Echo: Question number 3?") = 7 tokens = $0.007.
ESTIMATE, COST = 1.505, 0.007
BUDGET = 1.543  # admits a call while spent <= 0.038: six calls (spent 0, 0.007, ... 0.035), not a seventh


@pytest.fixture
def priced(tmp_path, monkeypatch):
    table = tmp_path / "prices.json"
    table.write_text(json.dumps({"models": {
        "openai:cand-priced": {"input": PER_TOKEN * 1e6, "output": PER_TOKEN * 1e6, "as_of": "2026-01-01"}}}))
    monkeypatch.setattr(engine_prices, "PRICES_FILE", table)
    return table


def _blueprint(text=TEXT):
    return import_files([("budget.yml", text, {})], via="test").items[0].blueprint


def test_a_run_stops_at_its_budget_keeps_what_ran_and_resumes_with_a_higher_cap(client, fake_provider, priced):
    run = run_start.start_run(_blueprint(), budget_usd=BUDGET)
    run.refresh_from_db()
    assert (run.status, run.stopped_reason) == ("cancelled", "budget"), (run.status, run.stopped_detail)
    assert "budget of $1.543" in run.stopped_detail
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Stopped at budget:" in page and 'name="budget_usd"' in page
    sent = fake_provider.requests()
    assert len(sent) == 6  # the seventh call was never sent
    # Spent, as each call was answered, stays within the cap (one worker: nothing else was in flight).
    assert run.spent_usd == pytest.approx(6 * COST)
    assert run.spent_usd <= run.budget_usd
    assert Response.objects.filter(run=run, status="done").count() == 6
    assert Response.objects.filter(run=run, status="pending").count() == 2
    assert run.candidate_cost_usd == pytest.approx(6 * COST)

    # Resuming with the same cap is refused with the reason; a higher cap runs the rest.
    with pytest.raises(actions.Refused, match="higher cap"):
        actions.resume(run)
    with pytest.raises(actions.Refused, match="higher cap"):
        actions.resume(run, budget_usd=0.01)
    with pytest.raises(actions.Refused, match="number of US dollars"):
        actions.resume(run, budget_usd="lots")
    # The page's Resume with a new cap goes through the same action.
    refused = client.post(f"/runs/{run.pk}/resume", {"budget_usd": "0.01"}, follow=True).content.decode()
    assert "higher cap" in refused
    client.post(f"/runs/{run.pk}/resume", {"budget_usd": "5"})
    run.refresh_from_db()
    assert (run.status, run.stopped_reason, run.budget_usd) == ("done", "", 5.0)
    status = client.get(f"/api/runs/{run.pk}").json()
    assert (status["budgetUsd"], status["stoppedReason"]) == (5.0, None) and status["spentUsd"] > 0
    assert len(fake_provider.requests()) == PROMPTS  # nothing that ran was asked again
    assert run.spent_usd == pytest.approx(PROMPTS * COST)
    assert run.items_done == PROMPTS


def test_the_api_takes_budgetUsd_at_start_and_on_resume(client, fake_provider, priced):
    _blueprint()
    answer = client.post("/api/runs", data=json.dumps({"blueprintId": "budget", "budgetUsd": BUDGET}),
                         content_type="application/json")
    assert answer.status_code == 201, answer.content
    run = Run.objects.get(pk=answer.json()["id"])
    assert (run.status, run.stopped_reason, run.budget_usd) == ("cancelled", "budget", BUDGET)
    refused = client.post(f"/api/runs/{run.pk}/resume", content_type="application/json")
    assert refused.status_code == 409 and "higher cap" in refused.json()["error"]
    resumed = client.post(f"/api/runs/{run.pk}/resume", data=json.dumps({"budgetUsd": 3}),
                          content_type="application/json")
    assert resumed.status_code == 200, resumed.content
    run.refresh_from_db()
    assert run.status == "done" and run.budget_usd == 3
    bad = client.post("/api/runs", data=json.dumps({"blueprintId": "budget", "budgetUsd": -1}),
                      content_type="application/json")
    assert bad.status_code == 400 and "budgetUsd" in bad.json()["error"]


def test_a_budgeted_run_whose_models_have_no_price_is_refused_with_the_reason(fake_provider, priced):
    blueprint = _blueprint(TEXT.replace("openai:cand-priced", "openai:cand-priced, openai:cand-unpriced"))
    with pytest.raises(RunRefused, match="needs a price") as refused:
        run_start.start_run(blueprint, budget_usd=1.0)
    assert "openai:cand-unpriced" in refused.value.message
    assert any("prices.json" in p for p in refused.value.problems)
    assert not Run.objects.exists() and not fake_provider.requests()
    # Without a budget the same run goes (its unknown cost is counted as unknown, as ever).
    assert run_start.start_run(blueprint).status in ("queued", "running", "done")


def test_overshoot_is_at_most_what_was_in_flight():
    """The guard alone: answers that cost more than counted can pass the cap only by what was in flight."""

    async def scenario():
        guard = BudgetGuard(10.0, estimate=lambda model, messages, max_tokens: 3.0)
        sent = []

        async def call(i):
            ticket = await guard.admit("m", [], None)
            if ticket is None:
                return
            sent.append(i)
            await asyncio.sleep(0.01)
            await guard.settle(ticket, 4.0)  # each answer cost more than its estimate

        await asyncio.gather(*(call(i) for i in range(10)))
        return guard, sent

    guard, sent = asyncio.run(scenario())
    assert guard.exhausted and "budget of $10" in guard.reason
    assert len(sent) == 3  # 3 x 3.0 fit in 10; then 12 spent, nothing more
    assert guard.spent_usd <= guard.budget_usd + guard.most_in_flight_usd


def test_run_blueprint_takes_budget(fake_provider, priced, tmp_path):
    from io import StringIO

    from django.core.management import call_command

    path = tmp_path / "budget-cli.yml"
    path.write_text(TEXT)
    err = StringIO()
    with pytest.raises(SystemExit) as exit_code:
        call_command("run_blueprint", str(path), "--budget", str(BUDGET), stdout=StringIO(), stderr=err)
    assert exit_code.value.code == 1  # stopped, like a cancelled run
    run = Run.objects.get()
    assert (run.status, run.stopped_reason, run.budget_usd) == ("cancelled", "budget", BUDGET)
    assert "stopped at its budget of $1.543" in err.getvalue() and "budgetUsd" in err.getvalue()
    assert len(fake_provider.requests()) == 6


def test_the_run_form_takes_a_budget(client, fake_provider, priced):
    blueprint = _blueprint()
    offered = {"blueprint": blueprint.slug, "revision": str(blueprint.current_revision.number)}
    page = client.get(f"/runs/form/{blueprint.slug}/").content.decode()
    assert 'name="budget_usd"' in page
    refused = client.post("/runs/start", {**offered, "budget_usd": "lots"}, follow=True).content.decode()
    assert "the budget is a number of US dollars above 0" in refused
    started = client.post("/runs/start", {**offered, "budget_usd": str(BUDGET)}, follow=True).content.decode()
    assert Run.objects.count() == 1, started[started.find('class="messages"'):][:600]
    run = Run.objects.get()
    assert (run.budget_usd, run.stopped_reason) == (BUDGET, "budget")


def _model_row(page: str, variant: str) -> list[str]:
    """The run page's per-model table row of ``variant``: its cells' text, in column order."""
    import re

    table = re.search(r'<table class="variants-table">.*?</table>', page, re.S).group(0)
    head = [re.sub(r"<[^>]+>", "", h).strip() for h in re.findall(r"<th scope=\"col\"[^>]*>(.*?)</th>", table, re.S)]
    row = re.search(rf"<tr>\s*<th scope=\"row\"><code>{re.escape(variant)}</code></th>(.*?)</tr>", table, re.S).group(1)
    cells = [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
    return dict(zip(head[1:], cells))


def test_a_budget_stopped_run_counts_what_did_not_run_apart_and_no_unknown_price(client, fake_provider, priced):
    """Not run is its own count (page, API, stored figures); unknown price counts only calls that were made."""
    run = run_start.start_run(_blueprint(), budget_usd=BUDGET)
    run.refresh_from_db()
    assert (run.status, run.stopped_reason) == ("cancelled", "budget")
    stats = run.aggregates["variants"]["openai:cand-priced[temp:0]"]
    assert (stats["n"], stats["notRun"], stats["notEvaluated"], stats["failed"]) == (6, 2, 0, 0)
    # Every call made had a price: nothing is of unknown price, on the header or in the model table.
    assert (stats["costUnknown"], run.candidate_cost_unknown) == (0, 0)
    assert stats["costUsd"] == pytest.approx(6 * COST) == pytest.approx(run.candidate_cost_usd)
    assert stats["calls"] == run.candidate_calls_sent == 6 == len(fake_provider.requests())
    page = client.get(f"/runs/{run.pk}/").content.decode()
    row = _model_row(page, "openai:cand-priced[temp:0]")
    assert (row["Scored"], row["Not run"], row["Not evaluated"]) == ("6", "2", "0"), row
    assert "unknown" not in row["Cost"] and "unknown price" not in page
    status = client.get(f"/api/runs/{run.pk}").json()
    assert status["models"]["openai:cand-priced[temp:0]"]["notRun"] == 2
    assert status["models"]["openai:cand-priced[temp:0]"]["notEvaluated"] == 0
    assert status["usage"]["candidates"]["callsWithUnknownCost"] == 0
    assert status["usage"]["candidates"]["calls"] == 6


TWO_TURNS = """title: Two turns
models: [openai:cand-priced]
---
- id: q0
  messages:
    - user: Question number 0?
    - assistant: null
    - user: And then?
  should:
    - $contains: Echo
"""
# Turn 1 is counted as 5 tokens in + 1500 out ($1.505) and costs 3 + 4 words ($0.007); turn 2 is counted as
# (51 characters -> 13 tokens) + 1500 ($1.513): with $0.007 spent it would pass $1.51, so it is never sent.
TWO_TURNS_BUDGET = 1.51


def test_what_a_budget_stop_between_turns_spent_stays_in_the_totals(client, fake_provider, priced):
    """The item stopped between turns goes back to pending from scratch; its first turn was paid for, and the
    run's totals (the sum of what is stored) keep it: they equal the budget's own ledger, before and after."""
    run = run_start.start_run(_blueprint(TWO_TURNS), budget_usd=TWO_TURNS_BUDGET)
    run.refresh_from_db()
    assert (run.status, run.stopped_reason) == ("cancelled", "budget"), run.stopped_detail
    assert len(fake_provider.requests()) == 1
    assert Response.objects.get(run=run).status == "pending"
    assert run.spent_usd == pytest.approx(COST)
    assert (run.candidate_cost_usd, run.candidate_calls_sent) == (pytest.approx(run.spent_usd), 1)
    assert run.candidate_input_tokens + run.candidate_output_tokens == 7
    stats = run.aggregates["variants"]["openai:cand-priced[temp:0]"]
    assert (stats["notRun"], stats["notEvaluated"], stats["costUsd"], stats["calls"]) == (1, 0, pytest.approx(COST), 1)

    actions.resume(run, budget_usd=5)
    run.refresh_from_db()
    # Turn 1 again (its answer from the cache: nothing sent, nothing spent), then turn 2.
    assert run.status == "done" and len(fake_provider.requests()) == 2
    assert run.candidate_cost_usd == pytest.approx(run.spent_usd) and run.candidate_calls_sent == 2
    assert run.candidate_cost_usd > COST
    calls_page = client.get(f"/runs/{run.pk}/responses/{Response.objects.get(run=run).pk}/calls").content.decode()
    # attempt 1: turn 1, and turn 2 that the budget held back; attempt 2: both turns
    assert calls_page.count("attempt 1") == 2 and calls_page.count("attempt 2") == 2
    assert "stopped by a cancel or the budget" in calls_page
