"""The summary's checker: a claim is shown only when every figure it states is the run's own (runs/engine/claims.py)."""

import pytest

from runs.engine.claims import Checker, Figures, check

A, B, C = "openai:gpt-4o[temp:0]", "anthropic:claude-3-5-haiku[temp:0]", "mistral:mistral-small[temp:0]"
FIGURES = Figures(
    variants=frozenset({A, B, C}), prompts=frozenset({"greet", "refund-policy"}), findings=frozenset({"F1", "F2"}),
    means={A: 0.8512, B: 0.62, C: 0.7},
    cells={("greet", A): 1.0, ("greet", B): 0.25, ("refund-policy", A): 0.7, ("refund-policy", B): 0.5},
    deltas={(A, B): (0.2312, "better"), (A, C): (0.1512, "cant_tell"), (B, C): (-0.08, "cant_tell")},
    pass_rates={A: 0.9, B: 0.5}, costs={A: 0.0123, B: 0.0031})


def one(claim: dict):
    return Checker(FIGURES).check(claim)


def mean_claim(text, value=0.85, model=A, **extra):
    return {"text": text, "values": [{"metric": "mean", "model": model, "value": value}], "says": [],
            "findings": [], **extra}


@pytest.mark.parametrize("text", [
    f"{A} averages 0.85.", f"{A} averages 85%.", f"{A} averages 85 percent.", f"{A} averages 0.851.",
])
def test_a_true_mean_is_accepted_in_either_unit(text):
    checked = one(mean_claim(text))
    assert checked.ok, checked.reason
    assert len(checked.spans) == 1


@pytest.mark.parametrize(("claim", "rule"), [
    (mean_claim(f"{A} averages 0.90.", value=0.90), "wrong number"),
    (mean_claim(f"{B} averages 0.85.", model=B), "wrong number"),  # a true number on another model
    (mean_claim(f"{A} averages 85.", ), "none of its values"),  # 85 for 0.85
    (mean_claim(f"{A} averages 85 points."), "none of its values"),  # a level is not points
    (mean_claim(f"{A} averages 0.85 over 12 prompts."), "'12'"),  # a number that is no value
    (mean_claim(f"{A} averages 0.85, like {B}."), "names model"),  # an id the claim is not about
    (mean_claim("openai:gpt-9 averages 0.85.", model="openai:gpt-9"), "unknown id"),
    (mean_claim(f"{A} averages 0.85 (F7).", findings=["F7"]), "unknown id"),
    (mean_claim(f"{A} averages 0.85 (F2)."), "F2"),
])
def test_each_broken_rule_is_refused_with_its_reason(claim, rule):
    checked = one(claim)
    assert not checked.ok
    assert rule in checked.reason


def delta_claim(text, value=0.23, says=None):
    return {"text": text, "values": [{"metric": "delta", "model": A, "vs": B, "value": value}],
            "says": says if says is not None else [{"model": A, "vs": B, "direction": "better"}], "findings": []}


def test_a_difference_is_points_not_percent_and_its_direction_is_the_verdicts():
    assert one(delta_claim(f"{A} is better than {B} by 23 points.")).ok
    assert one(delta_claim(f"{A} is better than {B} by 0.23.")).ok
    assert "none of its values" in one(delta_claim(f"{A} is better than {B} by 23%.")).reason
    wrong = delta_claim(f"{B} is better than {A} by 0.23.", says=[{"model": B, "vs": A, "direction": "better"}])
    assert "wrong direction" in one(wrong).reason
    unsaid = delta_claim(f"{A} is better than {B} by 0.23.", says=[])
    assert "without a 'says'" in one(unsaid).reason


def test_no_direction_may_be_claimed_on_cant_tell():
    claim = {"text": f"{A} beats {C}.", "values": [], "says": [{"model": A, "vs": C, "direction": "better"}],
             "findings": []}
    assert "can't tell" in one(claim).reason


def test_cells_costs_and_pass_rates_are_checked_on_their_own_figures():
    ok = {"text": f"On greet {A} scores 1.00 and costs $0.0123 in all, passing 90% of prompts.",
          "values": [{"metric": "cell", "model": A, "prompt": "greet", "value": 1.0},
                     {"metric": "cost_usd", "model": A, "value": 0.0123},
                     {"metric": "pass_rate", "model": A, "value": 0.9}], "says": [], "findings": []}
    checked = one(ok)
    assert checked.ok, checked.reason
    assert [s.value for s in checked.spans] == [0, 1, 2]
    wrong_prompt = {**ok, "text": f"On refund-policy {A} scores 1.00.",
                    "values": [{"metric": "cell", "model": A, "prompt": "greet", "value": 1.0}]}
    assert "prompt 'refund-policy'" in one(wrong_prompt).reason


@pytest.mark.parametrize("raw", [
    "just text", {"text": ""}, {"text": "x" * 601}, {"text": "a", "values": [{"metric": "median", "model": A,
                                                                              "value": 1}]},
    {"text": "a", "values": [{"metric": "mean", "model": A, "value": "0.85"}]},
    {"text": "a", "values": [{"metric": "mean", "model": A, "value": float("nan")}]},
    {"text": "a", "extra": 1},
])
def test_a_malformed_claim_is_refused_for_its_shape(raw):
    checked = one(raw)
    assert not checked.ok and checked.reason.startswith("shape:")


def test_a_whole_answer_is_read_claim_by_claim():
    results = check({"claims": [mean_claim(f"{A} averages 0.85."), mean_claim(f"{A} averages 0.95.", value=0.95)]},
                    FIGURES)
    assert [r.ok for r in results] == [True, False]
    assert results[1].to_dict()["reason"].startswith("wrong number")
