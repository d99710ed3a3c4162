"""runs.engine.aggregates: the figures the run page, the API and the exports show, from plain records."""

from __future__ import annotations

import pytest

from blueprints.spec.parse import parse_blueprint
from runs.engine.aggregates import ResponseRecord, Spend, run_aggregates, spend_of, stored_totals
from runs.engine.aggregates import aggregates_of
from runs.engine.matrix import build_matrix
from runs.engine.scoring import Rating, textbook_alpha

PROMPTS = parse_blueprint("""\
- id: light
  prompt: a
  should: [$contains: a]
- id: heavy
  prompt: b
  weight: 3
  should: [$contains: b]
""", fmt="yaml").blueprint.prompts


def test_a_variants_mean_weights_prompts_and_leaves_out_what_was_not_evaluated():
    records = [
        ResponseRecord(0, "m[temp:0]", score=1.0, latency_ms=100, input_tokens=10, output_tokens=5, cost_usd=0.01,
                       judge_usage={"calls": 2, "inputTokens": 7, "outputTokens": 3, "costUsd": None}),
        ResponseRecord(1, "m[temp:0]", score=0.2, latency_ms=300, input_tokens=20, output_tokens=5, cost_usd=None,
                       violated_should_not=True, disagreement=True),
        ResponseRecord(0, "n[temp:0]", score=0.5),
        ResponseRecord(1, "n[temp:0]", score=None, failed=True),
    ]
    # What each response's calls spent: the second response's one call had no price; n's failed call was sent.
    spends = [spend_of(records[0], calls_sent=1), spend_of(records[1], calls_sent=1, cost_unknown=1),
              spend_of(records[2]), spend_of(records[3], calls_sent=1)]
    out = run_aggregates(records, PROMPTS, ratings=[], spends=spends)
    m, n = out["variants"]["m[temp:0]"], out["variants"]["n[temp:0]"]
    assert m["mean"] == pytest.approx((1.0 * 1 + 0.2 * 3) / 4)
    assert (m["n"], m["notEvaluated"], m["failed"], m["violatedShouldNot"], m["disagreements"]) == (2, 0, 0, 1, 1)
    assert (m["inputTokens"], m["outputTokens"], m["costUsd"], m["costUnknown"], m["calls"]) == (30, 10, 0.01, 1, 2)
    # Every judge call of unknown price counts (a stored usage without the count: all its calls).
    assert (m["judgeInputTokens"], m["judgeCostUnknown"], m["latencyMs"]) == (7, 2, 200)
    assert (n["mean"], n["n"], n["notEvaluated"], n["failed"]) == (0.5, 1, 1, 1)
    assert out["cells"] == {"light": {"m[temp:0]": 1.0, "n[temp:0]": 0.5}, "heavy": {"m[temp:0]": 0.2, "n[temp:0]": None}}
    assert out["overall"]["n"] == 2 and out["overall"]["mean"] == pytest.approx((0.4 + 0.5) / 2)
    assert "cellDetails" not in out


def test_not_run_is_its_own_count_and_unknown_price_counts_only_calls_made():
    """A stopped run: what never ran is "not run", never "not evaluated"; a response that made no call adds no
    call of unknown price, and the run's totals are the sum of the model table's (earlier attempts included)."""
    records = [
        ResponseRecord(0, "m", score=1.0, status="done", input_tokens=5, output_tokens=2, cost_usd=None,
                       judge_usage={"calls": 1, "inputTokens": 9, "outputTokens": 1, "costUsd": 0.5,
                                    "unknownCostCalls": 0}),
        ResponseRecord(1, "m", score=None, status="pending"),  # never ran: no cost, no call
        ResponseRecord(0, "n", score=None, status="done"),  # ran, nothing could be evaluated
        ResponseRecord(1, "n", score=None, status="running"),
    ]
    spends = [spend_of(records[0], calls_sent=1, cost_unknown=1, judge_calls_sent=1), spend_of(records[1]),
              spend_of(records[2], calls_sent=1), spend_of(records[3]),
              # an earlier attempt of m's first response: a retry replaced it, what it spent stays
              Spend("m", calls_sent=2, input_tokens=4, cost_usd=0.25, cost_unknown=0, judge_calls_sent=1,
                    judge_usage={"calls": 1, "inputTokens": 3, "outputTokens": 1, "costUsd": None,
                                 "unknownCostCalls": 1})]
    matrix = build_matrix(records, PROMPTS, stopped=True)
    out = aggregates_of(matrix, records, ratings=[], spends=spends)
    m, n = out["variants"]["m"], out["variants"]["n"]
    assert (m["n"], m["notEvaluated"], m["notRun"]) == (1, 0, 1)
    assert (n["n"], n["notEvaluated"], n["notRun"]) == (0, 1, 1)
    assert (m["costUnknown"], n["costUnknown"]) == (1, 0)
    assert (m["calls"], m["inputTokens"], m["costUsd"], m["judgeCalls"], m["judgeCostUsd"], m["judgeCostUnknown"]) \
        == (3, 9, 0.25, 2, 0.5, 1)
    totals = stored_totals(records, {"ok": 1, "failed": 0}, spends)
    assert totals["candidate_cost_unknown"] == m["costUnknown"] + n["costUnknown"] == 1
    assert totals["candidate_calls_sent"] == m["calls"] + n["calls"] == 4
    assert (totals["candidate_input_tokens"], totals["judge_input_tokens"], totals["judge_cost_unknown"]) == (9, 12, 1)
    assert (totals["items_done"], totals["candidate_cost_usd"], totals["judge_cost_usd"]) == (2, 0.25, 0.5)


def test_trials_make_cell_details_and_a_cell_is_their_mean():
    records = [ResponseRecord(0, "m", trial=t, score=s) for t, s in enumerate((1.0, 0.0, 0.5))]
    out = run_aggregates(records, PROMPTS, ratings=[])
    assert out["cells"]["light"]["m"] == 0.5
    assert out["cellDetails"]["light"]["m"]["k"] == 3


def test_agreement_is_reused_when_given_and_worked_out_from_ratings_otherwise():
    given = {"alpha": 0.5}
    assert run_aggregates([], PROMPTS, agreement=given)["agreement"] is given
    ratings = [[Rating("a", 1.0, "x:a", "holistic"), Rating("b", 1.0, "x:b", "holistic")],
               [Rating("a", 0.0, "x:a", "holistic"), Rating("b", 0.25, "x:b", "holistic")]]
    worked = run_aggregates([], PROMPTS, ratings=ratings)["agreement"]
    assert (worked["points"], worked["judges"]) == (2, 2)
    assert worked == textbook_alpha(ratings).to_dict()  # the run's figure is the engine's textbook alpha


def test_judge_usage_counts_each_call_of_unknown_price_and_keeps_the_known_cost():
    from runs.engine.assess import JudgeUsage
    from runs.engine.judge import JudgeSpec, JudgeVerdict

    judge = JudgeSpec("openai:j")
    verdicts = [JudgeVerdict(judge, score=1.0, calls=2, cost_usd=None),  # a repair: two calls, price unknown
                JudgeVerdict(judge, score=0.5, calls=1, cost_usd=0.25),
                JudgeVerdict(judge, score=0.0, calls=1, cost_usd=None)]
    usage = JudgeUsage.of(verdicts)
    assert (usage.calls, usage.unknown_cost_calls, usage.cost_usd) == (4, 3, 0.25)
    total = usage + JudgeUsage.of([JudgeVerdict(judge, score=1.0, calls=1, cost_usd=None)])
    assert (total.calls, total.unknown_cost_calls, total.cost_usd) == (5, 4, 0.25)
    assert JudgeUsage.from_dict(usage.to_dict()) == usage
    assert JudgeUsage.of([JudgeVerdict(judge, score=1.0, calls=1, cost_usd=None)]).cost_usd is None  # none known


def test_the_resamples_drawn_ahead_are_those_the_intervals_use():
    """``draw_intervals_ahead`` (the CLI draws while its calls wait) fills the very entry ``variant_intervals``
    reads: after it, working out a run's intervals draws nothing."""
    from runs.engine import stats
    from runs.engine.aggregates import draw_intervals_ahead, variant_intervals

    records = [ResponseRecord(0, "m", score=1.0), ResponseRecord(1, "m", score=0.25),
               ResponseRecord(0, "n", score=0.5), ResponseRecord(1, "n", score=0.75)]
    stats.resample_counts.cache_clear()
    draw_intervals_ahead(len(PROMPTS))
    drawn = stats.resample_counts.cache_info()
    assert (drawn.misses, drawn.currsize) == (1, 1)
    intervals = variant_intervals(build_matrix(records, PROMPTS, stopped=False))
    after = stats.resample_counts.cache_info()
    assert (after.misses, after.hits) == (1, drawn.hits + 1)
    assert intervals["m"].low is not None and intervals["m"].n == 2
    draw_intervals_ahead(0)  # a blueprint without prompts: nothing drawn
    assert stats.resample_counts.cache_info().misses == 1
