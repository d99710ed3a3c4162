"""What would flip a decision (runs/engine/robustness.py): each alternative re-decided from stored results."""

from __future__ import annotations

import pytest

from runs.engine import robustness, stats
from runs.engine.matrix import ResponseRecord, build_matrix
from tests.fakes.robustness_fixture import A, B, answers, prompts

N = 40


def shown(answers_, prompts_):
    """The verdict the pages show: the matrix's cell scores through ``stats.paired_many``."""
    records = [ResponseRecord(a.prompt_index, a.variant_id, a.trial, a.score, verdict=a.verdict) for a in answers_]
    matrix = build_matrix(records, prompts_)
    cols = {v: {c.prompt_id: c.score for c in matrix.cells.values() if c.variant_id == v} for v in (A, B)}
    return stats.paired_many([(cols[A], cols[B])], {p.id: p.weight for p in prompts_})[0]


def test_when_one_judge_alone_reverses_the_winner_the_flip_names_that_judge():
    ps, data = prompts(N), answers(N, reverse=True)
    assert shown(data, ps).verdict == "better"
    (found,) = robustness.pairs_within(data, ps, [(A, B, "better")])
    judge_flips = [f for f in found.flips if f.kind == "judge"]
    assert [(f.what, f.verdict) for f in judge_flips] == [("judge j-two alone decides", "worse")]
    assert found.alternatives == found.same + len(found.flips)
    assert "it flips if judge j-two alone decides (worse)" in found.line
    assert found.line.startswith(f"{A} better than {B} under {found.same} of {found.alternatives} alternatives")


def test_a_robust_decision_says_no_single_alternative_flips_it():
    ps, data = prompts(N), answers(N, reverse=False, rude_b=0.3)
    (found,) = robustness.pairs_within(data, ps, [(A, B, shown(data, ps).verdict)])
    assert found.verdict == "better" and found.flips == []
    kinds = {}
    for alt in robustness.alternatives_for([robustness.Side(data, ps)], ps):
        kinds[alt.kind] = kinds.get(alt.kind, 0) + 1
    # two judges; tags safety, maths and general (none on every prompt); required and should-not groups;
    # judged and function points mixed
    assert kinds == {"judge": 2, "tag": 3, "group": 2, "weights": 2}
    assert found.alternatives == 9 and found.same == 9
    assert found.line.endswith("under 9 of 9 alternatives; no single alternative flips it")


def test_the_judge_alone_scores_are_the_engines_own_rules_on_that_judges_answers():
    from runs.engine.scoring import ScoredPoint, calculate, round2

    ps, data = prompts(6), answers(6, reverse=True)
    side = robustness.Side(data, ps)
    cols = side.rescored(robustness.judge_alone("j-two(openai:j2)"), judged_needed=True)
    for a in data:
        points = [ScoredPoint(dict(p.judges)["j-two(openai:j2)"] if not p.inverted else
                              1 - dict(p.judges)["j-two(openai:j2)"], p.multiplier, p.path_id, p.kind)
                  if p.kind == "judged" else ScoredPoint(p.score, p.multiplier, p.path_id, p.kind) for p in a.points]
        assert cols[a.variant_id][f"p{a.prompt_index}"] == round2(calculate(points).score)
    # every weight doubled (so re-scored, not taken as stored) changes no score: the stored ones come back
    same = side.rescored(lambda row: (row.score, 2 * row.multiplier, row.path_id, row.kind))
    assert same == side.base()


def test_a_tag_left_out_drops_its_prompts_and_trials_are_drawn_again_with_a_fixed_seed():
    ps, data = prompts(12, trials=3), answers(12, reverse=False, trials=3)
    alts = robustness.alternatives_for([robustness.Side(data, ps)], ps)
    assert sum(1 for a in alts if a.kind == "trials") == robustness.TRIAL_RESAMPLES
    first = robustness.pairs_within(data, ps, [(A, B, "better")])[0]
    again = robustness.pairs_within(data, ps, [(A, B, "better")])[0]
    assert first.to_dict() == again.to_dict()
    study = robustness.Study([robustness.Side(data, ps)], ps)
    i = next(i for i, a in enumerate(study.alternatives) if a.kind == "tag" and a.param == "safety")
    kept = study.columns(0)[i][A]
    assert set(kept) == {p.id for p in ps}  # the cells stay; the pair leaves the tagged prompts out
    with_tag = {p.id for p in ps if "safety" in p.tags}
    xa = {k: v for k, v in kept.items() if k not in with_tag}
    xb = {k: v for k, v in study.columns(0)[i][B].items() if k not in with_tag}
    assert stats.compare_scores(xa, xb).n == 12 - len(with_tag)


def test_a_cant_tell_line_says_what_would_decide_it():
    r = robustness.Robustness("x", "y", "cant_tell", 5, 4, [robustness.Flip("without the tag 't'", "tag", "better")])
    assert r.line == "can't tell x from y under 4 of 5 alternatives; it would be decided if without the tag 't' (better)"
    r = robustness.Robustness("x", "y", "better", 0, 0)
    assert "no alternative to try" in r.line


def _pairs_judged(quality_a: float, quality_b: float, n: int = 400, gamma: float = 3.0, seed: int = 5):
    """People's Pairs judgements of A against B: B writes longer answers, and the judges like length (``gamma``);
    each judgement's outcome follows quality plus that taste (``ratings.Comparison`` with its style)."""
    import numpy as np
    from scipy.special import expit

    from runs.engine.ratings import Comparison, style_difference, style_of

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        la, lb = int(300 * rng.lognormal(0, 0.5)), int(600 * rng.lognormal(0, 0.5))
        s = style_difference(style_of("w" * la), style_of("w" * lb))
        first, second, diff = (A, B, s) if i % 2 == 0 else (B, A, tuple(-x for x in s))
        qa, qb = (quality_a, quality_b) if first == A else (quality_b, quality_a)
        won = rng.random() < expit(qa - qb + gamma * diff[0])
        out.append(Comparison(first, second, "a" if won else "b", diff))
    return out


def test_style_alternative_flips_when_people_prefer_b_beyond_style_and_not_when_style_alone_misleads():
    """The robust fixture (A better on the scores under 9 of 9 alternatives) with Pairs judgements beside it.
    Flipping: people prefer B's answers beyond their length (a planted quality gap), so the style-controlled
    rating says A is worse: the one flip is "style". Not flipping: people pick B's longer answers though A is
    better; the raw preference would say B, but controlled for style A is better, as the scores say."""
    from runs.engine.ratings import ratings, style_verdicts

    ps, data = prompts(N), answers(N, reverse=False, rude_b=0.3)
    flipping = style_verdicts(_pairs_judged(0.0, 1.2), [(A, B)], bootstrap=200)
    assert flipping == {(A, B): "worse"}
    (found,) = robustness.pairs_within(data, ps, [(A, B, "better")], flipping)
    assert [(f.kind, f.what, f.verdict) for f in found.flips] == [
        ("style", "the Pairs rating controlled for style decides", "worse")]
    assert (found.alternatives, found.same) == (10, 9)
    assert found.to_dict()["flips"][0] == {"what": "the Pairs rating controlled for style decides", "kind": "style",
                                           "verdict": "worse"}
    assert "it flips if the Pairs rating controlled for style decides (worse)" in found.line

    misleading = _pairs_judged(1.0, 0.0)
    raw = {r.model: r.strength for r in ratings(misleading, bootstrap=0)}
    assert raw[B] > raw[A]  # the length bias wins the raw rating
    held = style_verdicts(misleading, [(A, B)], bootstrap=200)
    assert held == {(A, B): "better"}
    (found,) = robustness.pairs_within(data, ps, [(A, B, "better")], held)
    assert found.flips == [] and (found.alternatives, found.same) == (10, 10)
    assert found.line.endswith("under 10 of 10 alternatives; no single alternative flips it")


def test_no_style_alternative_without_pairs_judgements_of_both_models():
    from runs.engine.ratings import Comparison, style_verdicts

    ps, data = prompts(N), answers(N, reverse=False, rude_b=0.3)
    assert style_verdicts([], [(A, B)]) == {}
    only_a = [Comparison(A, "other", "a", (0.1, 0.0, 0.0, 0.0))] * 5
    assert style_verdicts(only_a, [(A, B)]) == {}  # B never judged: no say
    no_style = [Comparison(A, B, "a")] * 5  # answers whose text is gone: no style, left out
    assert style_verdicts(no_style, [(A, B)]) == {}
    (found,) = robustness.pairs_within(data, ps, [(A, B, "better")], {})
    assert found.alternatives == 9 and not any(f.kind == "style" for f in found.flips)
