"""A run's totals (items, judge calls, tokens, cost) are the sum of what is stored, after a retry, a cancel and
a resume, and a re-run of one response: counters never drift from the rows they count.

Runs go through the production path (start -> worker tasks run inline -> records) against the fake server.
"""

from __future__ import annotations

import pytest

from runs import actions
from runs import start as run_start
from runs import work as run_work
from runs.models import PointAssessment, Response, Run

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
    for usage in finished.values_list("judge_usage", flat=True):
        judge_in += (usage or {}).get("inputTokens") or 0
        judge_out += (usage or {}).get("outputTokens") or 0
    return {
        "items_done": finished.count(), "items_failed": rows.filter(status="failed").count(),
        "judge_calls_done": ok, "judge_calls_failed": failed,
        "candidate_input_tokens": sum(rows.values_list("input_tokens", flat=True).exclude(input_tokens=None)),
        "candidate_output_tokens": sum(rows.values_list("output_tokens", flat=True).exclude(output_tokens=None)),
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


def test_a_rerun_counts_the_response_once(fake_provider):
    script_candidates(fake_provider)
    run = run_start.start_run(corpus_blueprint(), models=["openai:cand-a"], judges=["openai:judge-a", "openai:judge-b"])
    before = counters(run)
    response = Response.objects.filter(run=run).first()
    actions.rerun(run, response)
    after = counters(run)
    assert after == stored_sums(run) and run.status == "done"
    # The same answers again: every total is what it was (no judge call or token counted twice).
    assert after == before
