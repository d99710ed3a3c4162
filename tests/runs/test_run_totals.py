"""A run's totals (items, judge calls, tokens, cost) are the sum of what is stored, after a retry, a cancel and
a resume, and a re-run of one response: counters never drift from the rows they count.

Runs go through the production path (start -> worker tasks run inline -> records) against the fake server.
"""

from __future__ import annotations

import json
import re

import pytest

from blueprints.importing import import_files
from runs import actions
from runs import start as run_start
from runs import work as run_work
from runs.models import EarlierAttempt, PointAssessment, Response, Run

from runs.engine.providers import prices as engine_prices

from .conftest import judge_rules
from .test_run_lifecycle import corpus_blueprint, script_candidates

pytestmark = pytest.mark.django_db(transaction=True)


def stored_sums(run: Run) -> dict:
    rows = Response.objects.filter(run=run)
    finished = rows.filter(status__in=["done", "failed"])
    ok = failed = 0
    judge_in = judge_out = 0
    for verdicts in PointAssessment.objects.filter(response__run=run).values_list("verdicts", flat=True):
        for v in verdicts:
            if (v.get("role") or "primary") != "primary":
                continue
            if v.get("error") is None and v.get("score") is not None:
                ok += 1
            else:
                failed += 1
    earlier = EarlierAttempt.objects.filter(run=run)
    for usage in [*finished.values_list("judge_usage", flat=True), *earlier.values_list("judge_usage", flat=True)]:
        judge_in += (usage or {}).get("inputTokens") or 0
        judge_out += (usage or {}).get("outputTokens") or 0
    return {
        "items_done": finished.count(), "items_failed": rows.filter(status="failed").count(),
        "judge_calls_done": ok, "judge_calls_failed": failed,
        # Every attempt's tokens: the responses' own, and what their earlier attempts spent.
        "candidate_input_tokens": sum(rows.values_list("input_tokens", flat=True).exclude(input_tokens=None))
        + sum(earlier.values_list("candidate_input_tokens", flat=True)),
        "candidate_output_tokens": sum(rows.values_list("output_tokens", flat=True).exclude(output_tokens=None))
        + sum(earlier.values_list("candidate_output_tokens", flat=True)),
        "judge_input_tokens": judge_in, "judge_output_tokens": judge_out,
    }


def counters(run: Run) -> dict:
    run.refresh_from_db()
    return {k: getattr(run, k) for k in stored_sums(run)}


def test_retry_failed_leaves_the_totals_equal_to_the_stored_sums(fake_provider):
    script_candidates(fake_provider)
    run = run_start.start_run(corpus_blueprint(), models=["openai:cand-a", "openai:flaky2-fail-401-then-ok"],
                             judges=["openai:judge-a", "openai:judge-b"])
    assert counters(run) == stored_sums(run) and run.items_failed == 1
    assert actions.retry_failed(run).count == 1
    assert counters(run) == stored_sums(run) and run.items_failed == 0 and run.judge_calls_done > 0


def test_cancel_and_resume_leave_the_totals_equal_to_the_stored_sums(fake_provider):
    script_candidates(fake_provider)
    run = run_start.start_run(corpus_blueprint(), models=["openai:cand-a", "openai:cand-b"],
                             judges=["openai:judge-a"], enqueue=False)
    first = list(Response.objects.filter(run=run).order_by("pk").values_list("pk", flat=True))[:1]
    run_work.execute_chunk(run.pk, first)
    actions.cancel(run)
    assert counters(run) == stored_sums(run) and run.status == "cancelled" and run.items_done == 1
    with pytest.raises(actions.Refused, match="already cancelled"):
        actions.cancel(run)
    actions.resume(run)
    assert counters(run) == stored_sums(run) and run.status == "done" and run.items_done == 4
    with pytest.raises(actions.Refused, match="nothing left to run"):
        actions.resume(run)


def test_a_rerun_counts_the_response_once_and_keeps_what_each_attempt_spent(fake_provider):
    script_candidates(fake_provider)
    run = run_start.start_run(corpus_blueprint(), models=["openai:cand-a"], judges=["openai:judge-a", "openai:judge-b"])
    before = counters(run)
    sent_before = len(fake_provider.requests())
    response = Response.objects.filter(run=run).first()
    actions.rerun(run, response)
    after = counters(run)
    assert after == stored_sums(run) and run.status == "done"
    # The item and its verdicts count once; the re-run's calls were sent afresh, and every token of both
    # attempts stays in the totals (the earlier attempt's as an EarlierAttempt of the response).
    once = ("items_done", "items_failed", "judge_calls_done", "judge_calls_failed")
    assert {k: after[k] for k in once} == {k: before[k] for k in once}
    response.refresh_from_db()
    attempt = EarlierAttempt.objects.get(response=response)
    assert (attempt.why, attempt.generation) == ("re-run", True)
    assert after["candidate_input_tokens"] == before["candidate_input_tokens"] + response.input_tokens
    assert after["judge_input_tokens"] == before["judge_input_tokens"] + response.judge_usage["inputTokens"]
    assert run.candidate_calls_sent + run.judge_calls_sent == len(fake_provider.requests()) > sent_before


def _model_table(page: str) -> dict[str, dict[str, str]]:
    """The run page's per-model table: for each model variant, its cells' text by column heading."""
    table = re.search(r'<table class="variants-table">.*?</table>', page, re.S).group(0)
    head = [re.sub(r"<[^>]+>", "", h).strip() for h in re.findall(r'<th scope="col"[^>]*>(.*?)</th>', table, re.S)]
    out = {}
    for variant, row in re.findall(r'<tr>\s*<th scope="row"><code>([^<]+)</code></th>(.*?)</tr>', table, re.S):
        cells = [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", c)).strip()
                 for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        out[variant] = dict(zip(head[1:], cells))
    return out


def test_a_cancelled_run_counts_not_run_apart_and_unknown_price_only_over_calls_made(client, fake_provider):
    """Models without a price, cancelled after one item: the rest is "not run" (never "not evaluated"), and the
    calls of unknown price are the calls that were made, the same on the header and in the model table."""
    script_candidates(fake_provider)
    run = run_start.start_run(corpus_blueprint(), models=["openai:cand-a", "openai:cand-b"],
                             judges=["openai:judge-a"], enqueue=False)
    first = Response.objects.get(run=run, prompt_index=0, variant_id="openai:cand-a[temp:0]")
    run_work.execute_chunk(run.pk, [first.pk])
    actions.cancel(run)
    run.refresh_from_db()
    assert run.status == "cancelled"
    a, b = (run.aggregates["variants"][v] for v in ("openai:cand-a[temp:0]", "openai:cand-b[temp:0]"))
    assert (a["n"], a["notRun"], a["notEvaluated"]) == (1, 1, 0)
    assert (b["n"], b["notRun"], b["notEvaluated"]) == (0, 2, 0)
    sent = fake_provider.requests()
    candidate_calls = [r for r in sent if r["model"].startswith("cand")]
    judge_calls = [r for r in sent if r["model"].startswith("judge")]
    assert (len(candidate_calls), len(judge_calls)) == (1, 5)  # one item: its answer and its 5 judged points
    # Unknown price: the calls made, nothing for what did not run; the header is the sum of the table.
    assert (a["costUnknown"], b["costUnknown"]) == (1, 0)
    assert run.candidate_cost_unknown == a["costUnknown"] + b["costUnknown"] == 1
    assert (a["judgeCostUnknown"], b["judgeCostUnknown"]) == (5, 0) and run.judge_cost_unknown == 5
    page = client.get(f"/runs/{run.pk}/").content.decode()
    rows = _model_table(page)
    assert (rows["openai:cand-a[temp:0]"]["Not run"], rows["openai:cand-a[temp:0]"]["Not evaluated"]) == ("1", "0")
    assert (rows["openai:cand-b[temp:0]"]["Not run"], rows["openai:cand-b[temp:0]"]["Not evaluated"]) == ("2", "0")
    assert rows["openai:cand-a[temp:0]"]["Cost"] == "unknown (1 call)"  # its one call had no price: never "$0"
    assert rows["openai:cand-b[temp:0]"]["Cost"] == "$0"  # nothing was sent
    assert rows["openai:cand-a[temp:0]"]["Judge cost"] == "unknown (5 calls)"
    assert "+ 1 call of unknown price" in page and "+ 5 calls of unknown price" in page
    status = client.get(f"/api/runs/{run.pk}").json()
    assert status["models"]["openai:cand-b[temp:0]"] | {} == {**status["models"]["openai:cand-b[temp:0]"],
                                                              "notRun": 2, "notEvaluated": 0}
    assert status["usage"]["candidates"]["callsWithUnknownCost"] == 1
    assert status["usage"]["judges"]["callsWithUnknownCost"] == 5


PER_TOKEN = 0.001
ANSWER = "Paris is the capital."
VERDICT = "<reflection>Yes, fully.</reflection><classification>CLASS_EXACTLY_MET</classification>"
GARBLED = "I cannot tell."
RETRY_TEXT = """title: Retry totals
models: [openai:cand-priced]
---
- id: q0
  prompt: Question zero?
  should:
    - Names the capital
- id: q1
  prompt: Question one?
  should:
    - Names the capital
"""


@pytest.fixture
def priced(tmp_path, monkeypatch):
    table = tmp_path / "prices.json"
    price = {"input": PER_TOKEN * 1e6, "output": PER_TOKEN * 1e6, "as_of": "2026-01-01"}
    table.write_text(json.dumps({"models": {"openai:cand-priced": price, "openai:judge-priced": price}}))
    monkeypatch.setattr(engine_prices, "PRICES_FILE", table)
    return table


def _billed(requests) -> tuple[int, int, int]:
    """(calls, tokens, answered calls) the fake server billed: its usage is words in and words out."""
    tokens = answered = 0
    for r in requests:
        if r.get("status") != 200:
            continue
        answered += 1
        reply = r["reply"]
        tokens += sum(len((m["content"] or "").split()) for m in r["messages"]) + len(reply.split())
    return len(requests), tokens, answered


def test_retry_failed_keeps_every_attempts_calls_tokens_and_cost(client, fake_provider, priced):
    """The first answer to q0 is empty and the judge's first two answers (ask and repair) are unreadable: both
    items fail, both are retried. Every call sent stays in the totals, with the attempt it belonged to."""
    fake_provider.script([
        {"model": "cand-priced", "match": "Question zero", "reply": "", "times": 1},
        {"model": "cand-priced", "match": ".", "reply": ANSWER},
        {"model": "judge-priced", "match": ".", "reply": GARBLED, "times": 2},
        {"model": "judge-priced", "match": ".", "reply": VERDICT},
    ])
    blueprint = import_files([("retry-totals.yml", RETRY_TEXT, {})], via="test").items[0].blueprint
    run = run_start.start_run(blueprint, judges=["openai:judge-priced"])
    run.refresh_from_db()
    assert (run.status, run.items_failed) == ("done", 2), run.aggregates
    before = {k: getattr(run, k) for k in ("candidate_calls_sent", "candidate_input_tokens", "candidate_output_tokens",
                                           "candidate_cost_usd", "judge_calls_sent", "judge_input_tokens",
                                           "judge_output_tokens", "judge_cost_usd")}
    assert (before["candidate_calls_sent"], before["judge_calls_sent"]) == (2, 2)
    assert before["judge_cost_usd"] > 0 and before["candidate_input_tokens"] > 0

    assert actions.retry_failed(run).count == 2
    run.refresh_from_db()
    assert (run.status, run.items_failed) == ("done", 0)
    after = {k: getattr(run, k) for k in before}
    assert all(after[k] >= before[k] for k in before), (before, after)
    assert (after["candidate_calls_sent"], after["judge_calls_sent"]) == (3, 4)

    # Equal to the sum of every attempt, as the provider billed it (usage: words in and out).
    sent = fake_provider.requests()
    judge_replies = iter([GARBLED, GARBLED, VERDICT, VERDICT])
    zero = [r for r in sent if r["model"] == "cand-priced" and "Question zero" in r["messages"][-1]["content"]]
    for r in sent:
        r["reply"] = next(judge_replies) if r["model"] == "judge-priced" else "" if r is zero[0] else ANSWER
    for prefix, model in (("candidate", "cand-priced"), ("judge", "judge-priced")):
        calls, tokens, _ = _billed([r for r in sent if r["model"] == model])
        assert after[f"{prefix}_calls_sent"] == calls
        assert after[f"{prefix}_input_tokens"] + after[f"{prefix}_output_tokens"] == tokens
        assert after[f"{prefix}_cost_usd"] == pytest.approx(tokens * PER_TOKEN)
    # The model table and the header agree.
    stats = run.aggregates["variants"]["openai:cand-priced[temp:0]"]
    assert stats["judgeCostUsd"] == pytest.approx(after["judge_cost_usd"])
    assert stats["costUsd"] == pytest.approx(after["candidate_cost_usd"])
    assert (stats["calls"], stats["judgeCalls"]) == (3, 4)
    status = client.get(f"/api/runs/{run.pk}").json()
    assert status["usage"]["judges"]["costUsd"] == pytest.approx(after["judge_cost_usd"])
    assert status["usage"]["judges"]["calls"] == 4

    # 'Every call' lists the earlier attempt's calls with the attempt they belonged to.
    q1 = Response.objects.get(run=run, prompt_id="q1")
    calls_page = client.get(f"/runs/{run.pk}/responses/{q1.pk}/calls").content.decode()
    # attempt 1: its answer (kept: only the judging was done again) and the judge asked twice; attempt 2: the judge
    assert calls_page.count("attempt 1") == 3 and calls_page.count("attempt 2") == 1
    assert calls_page.count(GARBLED) >= 2
    q0 = Response.objects.get(run=run, prompt_id="q0")
    calls_page = client.get(f"/runs/{run.pk}/responses/{q0.pk}/calls").content.decode()
    assert calls_page.count("attempt 1") == 1 and calls_page.count("attempt 2") == 2


def test_an_item_stopped_by_its_budget_keeps_what_its_calls_spent(fake_provider, priced, settings):
    """The candidate answered, then a judge hung until the item's budget ran out: the item fails with the
    reason, and its answer's tokens and cost stay in the run's totals (the provider billed them)."""
    from dataclasses import replace

    settings.EVALSITE_LIMITS = replace(settings.EVALSITE_LIMITS, item_budget_s=1.0)
    fake_provider.script([{"model": "cand-priced", "match": ".", "reply": ANSWER}])
    blueprint = import_files([("budget-item.yml", RETRY_TEXT.replace("- id: q1", "- id: q1\n  weight: 1"), {})],
                             via="test").items[0].blueprint
    run = run_start.start_run(blueprint, judges=["openai:judge-priced-always-hang"])
    run.refresh_from_db()
    assert run.status == "done" and run.items_failed == 2
    assert all(r.error.startswith("took longer than 1 s") for r in Response.objects.filter(run=run))
    answered = [r for r in fake_provider.requests() if r["model"] == "cand-priced"]
    for r in answered:
        r["reply"] = ANSWER
    calls, tokens, _ = _billed(answered)
    assert (run.candidate_calls_sent, calls) == (2, 2)
    assert run.candidate_input_tokens + run.candidate_output_tokens == tokens > 0
    assert run.candidate_cost_usd == pytest.approx(tokens * PER_TOKEN)
    stats = run.aggregates["variants"]["openai:cand-priced[temp:0]"]
    assert stats["costUsd"] == pytest.approx(run.candidate_cost_usd) and stats["calls"] == 2
