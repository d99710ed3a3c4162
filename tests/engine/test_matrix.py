"""The results matrix (runs/engine/matrix.py): the one owner of a cell's score, state, trial and heat."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from blueprints.spec.parse import parse_blueprint
from runs.engine import scoring
from runs.engine.matrix import (ResponseRecord, build_matrix, cell_state, heat_bucket, heat_class,
                                representative_trial, trial_state)
from runs.engine.scoring import TrialOutcome, aggregate_trials

BP = parse_blueprint(
    "models: [a]\n---\n"
    "- id: mean\n  prompt: one\n  trials: 3\n  should: [$contains: x]\n"
    "- id: best\n  prompt: two\n  trials: 3\n  trial_aggregation: best\n  should: [$contains: x]\n"
    "- id: passk\n  prompt: three\n  trials: 3\n  trial_aggregation: pass_at_k\n  should: [$contains: x]\n"
    "- id: once\n  prompt: four\n  weight: 3\n  should: [$contains: x]\n").blueprint


def rec(i, v, trial, score, status="done", **kw):
    return ResponseRecord(i, v, trial, score, status, response_id=100 * i + 10 * trial + len(v), **kw)


@pytest.mark.parametrize("status, score, stopped, state", [
    ("done", 0.5, False, "scored"), ("done", None, False, "not-evaluated"), ("failed", None, False, "failed"),
    ("pending", None, False, "pending"), ("running", None, False, "running"), ("pending", None, True, "not-run"),
    ("running", None, True, "not-run"), ("done", 0.0, True, "scored"),
])
def test_a_trials_state(status, score, stopped, state):
    assert trial_state(status, score, stopped=stopped) == state


@pytest.mark.parametrize("states, score, expected", [
    (["scored", "failed"], 0.4, "scored"),  # a cell with a score is scored
    (["not-evaluated", "failed"], None, "failed"),
    (["pending", "running"], None, "running"),
    (["not-run", "not-evaluated"], None, "not-run"),
    (["not-evaluated"], None, "not-evaluated"),
])
def test_a_cells_state_is_the_first_of_one_order(states, score, expected):
    assert cell_state(states, score) == expected


def test_each_rule_and_the_trial_a_cell_stands_for():
    records = [rec(i, "m", t, s) for i in range(3) for t, s in enumerate((None, 0.0, 1.0))]
    records += [rec(3, "m", 0, 0.5), rec(3, "n", 0, None, "failed", reason="HTTP 500")]
    m = build_matrix(records, BP.prompts)
    mean, best, passk, once = (m.cell(i, "m") for i in range(4))
    assert (mean.shown, best.shown, passk.shown, once.shown) == (0.5, 1.0, 0.5, 0.5)
    # Under best: the best trial; otherwise the first trial with a score.
    assert (mean.shown_trial, best.shown_trial, passk.shown_trial) == (1, 2, 1)
    assert best.response_id == 100 + 20 + 1
    failed = m.cell(3, "n")
    assert failed.state == "failed" and failed.shown is None and failed.reason == "HTTP 500"
    # The prompt weight counts in the model's mean (4 cells of m: 0.5, 1, 0.5, 0.5 x3) / 6.
    assert m.summaries["m"].mean == pytest.approx((0.5 + 1.0 + 0.5 + 0.5 * 3) / 6)
    assert m.summaries["n"].counts["failed"] == 1 and m.summaries["n"].mean is None
    assert m.variants == ["m", "n"]
    assert m.prompt_order("lowest")[-1] == 1 and m.row_mean(3) == 0.5


def test_a_cancelled_runs_waiting_cells_are_not_run():
    records = [rec(0, "m", 0, 1.0), rec(0, "m", 1, None, "pending"), rec(1, "m", 0, None, "pending")]
    live = build_matrix(records, BP.prompts)
    stopped = build_matrix(records, BP.prompts, stopped=True)
    assert live.cell(1, "m").state == "pending" and stopped.cell(1, "m").state == "not-run"
    assert stopped.cell(0, "m").state == "scored" and not stopped.cell(0, "m").complete
    assert stopped.summaries["m"].counts["not-run"] == 1


def test_heat():
    assert [heat_bucket(s) for s in (None, 0.0, 0.09, 0.1, 0.33, 0.999, 1.0)] == [None, 0, 0, 1, 3, 9, 10]
    assert heat_class(None) == "heat-none" and heat_class(0.7) == "heat-7"
    assert representative_trial(aggregate_trials([], "best")) is None


scores = st.one_of(st.none(), st.floats(0, 1))
verdicts = st.sampled_from([None, "pass", "fail", "borderline"])


@given(scores, verdicts, st.sampled_from([None, "mean", "best"]))
def test_one_trial_is_read_as_the_general_rule_reads_it(score, verdict, aggregation):
    """aggregate_trials's shortcut for a single trial gives exactly what its general case gives."""
    only = TrialOutcome(0, score, verdict)
    fast = aggregate_trials([only], aggregation)
    general = scoring._aggregate_trials([only], aggregation or "mean", verdicts=None, use_verdicts=False,
                                        threshold=None)
    assert fast == general


SIGNED = parse_blueprint(
    "models: [a]\n---\n"
    "- id: mean\n  prompt: one\n  trials: 3\n  threshold: 0.5\n  should: [$contains: x]\n"
    "- id: best\n  prompt: two\n  trials: 3\n  threshold: 0.8\n  trial_aggregation: best\n  should: [$contains: x]\n"
    "- id: passk\n  prompt: three\n  trials: 3\n  threshold: 0.8\n  trial_aggregation: pass_at_k\n"
    "  should: [$contains: x]\n"
    "- id: unsigned\n  prompt: four\n  trials: 3\n  should: [$contains: x]\n"
    "- id: failed\n  prompt: five\n  threshold: 0.8\n  should: [$contains: x]\n").blueprint


def test_one_rule_for_a_cell_that_passed_and_a_variants_pass_rate():
    """The cell's verdict by its prompt's rule decides; no pass mark is no verdict, never a fail; a pass mark with
    no verdict (a failed response) is undecided, left out of the rate."""
    verdict = {1.0: "pass", 0.0: "fail"}
    records = [rec(i, "m", t, s, verdict=verdict[s] if SIGNED.prompts[i].has_verdicts else None)
               for i, scores in enumerate([(1.0, 0.0, 1.0), (0.0, 0.0, 1.0), (1.0, 0.0, 0.0), (1.0, 1.0, 1.0)])
               for t, s in enumerate(scores)]
    records.append(rec(4, "m", 0, None, "failed", reason="HTTP 500"))
    m = build_matrix(records, SIGNED.prompts)
    mean, best, passk, unsigned, failed = (m.cell(i, "m") for i in range(5))
    assert [c.pass_state for c in (mean, best, passk, unsigned, failed)] == [
        "pass", "pass", "fail", "no-threshold", "undecided"]
    assert [c.passed for c in (mean, best, passk, unsigned, failed)] == [True, True, False, None, None]
    # The verdict is AI Eval's own rule, 1 - (1 - p)^k: one good trial of three is 0.704, under 0.8, so it fails;
    # the pass@k figure is Chen et al.'s unbiased estimate, 1 - C(n-c, k) / C(n, k): with k = n = 3 and one pass, 1.
    assert passk.outcome.rule_pass_at_k == pytest.approx(1 - (1 - 1 / 3) ** 3) and passk.shown == 0.33
    assert passk.outcome.pass_at_k == 1.0
    # The mean's band at 0.5: 0.67 passes, though it is under the 0.8 a grid's score cut defaults to.
    assert mean.shown == 0.67 and mean.rule_text == "mean of 3 trials" and best.rule_text == "best of 3 trials"
    assert passk.rule_text == "pass@k of 3 trials" and failed.rule_text == "one response"
    count = m.passes("m")
    assert (count.passed, count.failed, count.undecided, count.no_threshold) == (2, 1, 1, 1)
    assert count.rate == pytest.approx(2 / 3) and count.has_threshold
    assert count.to_dict()["passRate"] == pytest.approx(2 / 3)
    assert m.passes("nobody").rate is None and not m.passes("nobody").has_threshold


def test_without_a_pass_mark_a_variant_has_no_pass_rate():
    m = build_matrix([rec(3, "m", t, 1.0) for t in range(3)], SIGNED.prompts)
    count = m.passes("m")
    assert (count.no_threshold, count.rate, count.has_threshold) == (1, None, False)
