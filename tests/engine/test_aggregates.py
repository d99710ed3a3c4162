"""runs.engine.aggregates: the figures the run page, the API and the exports show, from plain records."""

from __future__ import annotations

import pytest

from blueprints.spec.parse import parse_blueprint
from runs.engine.aggregates import ResponseRecord, run_aggregates
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
    out = run_aggregates(records, PROMPTS, ratings=[])
    m, n = out["variants"]["m[temp:0]"], out["variants"]["n[temp:0]"]
    assert m["mean"] == pytest.approx((1.0 * 1 + 0.2 * 3) / 4)
    assert (m["n"], m["notEvaluated"], m["failed"], m["violatedShouldNot"], m["disagreements"]) == (2, 0, 0, 1, 1)
    assert (m["inputTokens"], m["outputTokens"], m["costUsd"], m["costUnknown"]) == (30, 10, 0.01, 1)
    # Every judge call of unknown price counts (a stored usage without the count: all its calls).
    assert (m["judgeInputTokens"], m["judgeCostUnknown"], m["latencyMs"]) == (7, 2, 200)
    assert (n["mean"], n["n"], n["notEvaluated"], n["failed"]) == (0.5, 1, 1, 1)
    assert out["cells"] == {"light": {"m[temp:0]": 1.0, "n[temp:0]": 0.5}, "heavy": {"m[temp:0]": 0.2, "n[temp:0]": None}}
    assert out["overall"]["n"] == 2 and out["overall"]["mean"] == pytest.approx((0.4 + 0.5) / 2)
    assert "cellDetails" not in out


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
