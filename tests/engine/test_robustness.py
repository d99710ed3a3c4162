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
