"""Scores from points: groups and paths, per-model statistics, similarity, judge agreement."""

from __future__ import annotations

import asyncio
import math
import random

import krippendorff
import numpy as np
import pytest

from runs.engine.scoring import (
    Rating,
    ScoredPoint,
    aggregate,
    calculate,
    cosine_similarity,
    judge_agreement,
    krippendorff_alpha_interval,
    model_stats,
    round2,
    run_stats,
    similarity_to_ideal,
    textbook_alpha,
)


def P(score, path_id=None, multiplier=1.0):
    return ScoredPoint(score=score, multiplier=multiplier, path_id=path_id)


@pytest.mark.parametrize("points, expected", [
    ([P(1.0), P(0.5), P(0.0)], 0.5),
    ([P(1.0, multiplier=3), P(0.5)], 0.875),  # the guide's multiplier example
    ([P(0.9, multiplier=None)], 0.9),  # a missing multiplier counts 1
    # The guide's worked example: required 0.75, path_3 0.1, path_4 0.0 -> (0.75 + 0.1) / 2 (deviation 6).
    ([P(1.0), P(0.75), P(0.5), P(0.2, "path_3"), P(0.0, "path_3"), P(0.0, "path_4"), P(0.0, "path_4")], 0.425),
    # Errored points are left out of their group's mean.
    ([P(1.0), P(None), P(0.5)], 0.75),
    # A group whose points all errored is left out, not counted as 0 (deviation 1).
    ([P(None), P(0.4, "path_0")], 0.4),
    ([P(0.8), P(None, "path_0"), P(None, "path_1")], 0.8),
    # should_not paths are their own groups; the worst counts (deviation 2).
    ([P(1.0, "not_path_0"), P(0.2, "not_path_1"), P(0.6, "not_path_1")], 0.4),
    # Three groups: required, best should path, worst should_not path.
    ([P(0.9), P(0.5, "path_0"), P(0.7, "path_1"), P(1.0, "not_path_0"), P(0.2, "not_path_1")], 0.6),
    # A should_not path whose points all errored is left out, and does not become the worst.
    ([P(0.9), P(None, "not_path_0"), P(0.7, "not_path_1")], 0.8),
])
def test_aggregate(points, expected):
    assert aggregate(points) == pytest.approx(expected)


@pytest.mark.parametrize("points", [[], [P(None)], [P(None, "path_0"), P(None, "not_path_0"), P(None)]])
def test_nothing_scorable_means_no_score_never_zero(points):
    assert aggregate(points) is None


def test_the_calculation_shows_each_step():
    calc = calculate([P(1.0), P(0.5, multiplier=2), P(0.2, "path_1"), P(0.4, "path_1"), P(None, "path_0"),
                      P(0.9, "path_10"), P(0.6, "not_path_0"), P(0.3, "not_path_2")])
    assert calc.required.mean == pytest.approx(2 / 3) and calc.required.points == 2
    assert [g.path_id for g in calc.paths] == ["path_0", "path_1", "path_10"]  # numeric order, not text order
    assert [g.mean for g in calc.paths] == [None, pytest.approx(0.3), 0.9]
    assert calc.best_path.path_id == "path_10" and calc.worst_not_path.path_id == "not_path_2"
    assert calc.left_out == ("path_0",)
    assert [name for name, _ in calc.parts] == ["required", "path_10", "not_path_2"]
    assert calc.score == pytest.approx((2 / 3 + 0.9 + 0.3) / 3)
    shown = calc.to_dict()
    assert shown["bestPath"] == "path_10" and shown["worstNotPath"] == "not_path_2"
    assert shown["leftOut"] == ["path_0"] and shown["required"]["scored"] == 2


# parseFloat(x.toFixed(2)) in Node for each value (the float's exact binary value, halves up).
@pytest.mark.parametrize("value, expected", [(0.125, 0.13), (0.001, 0.0), (0.005, 0.01), (0.834, 0.83),
                                             (0.6666, 0.67), (1.0, 1.0), (0.0, 0.0), (0.425, 0.42),
                                             (0.585, 0.58), (0.595, 0.59), (1.005, 1.0), (0.015, 0.01)])
def test_round2_rounds_as_javascripts_to_fixed(value, expected):
    assert round2(value) == expected


@pytest.mark.parametrize(("scores", "expected"), [([0.58, 0.59], 0.58), ([0.6, 0.59], 0.59)])
def test_the_final_score_rounds_as_the_upstream(scores, expected):
    # The vectors: two required points; upstream gives 0.58 and 0.59 (Math.round would give 0.59, 0.6).
    from runs.engine.scoring import ScoredPoint

    assert round2(calculate([ScoredPoint(score=s, multiplier=1.0, path_id=None) for s in scores]).score) == expected


def test_model_stats_weight_the_mean_by_prompt_and_count_what_was_left_out():
    stats = model_stats([(1.0, 3.0), (0.5, None), (None, 2.0), (0.0, 1.0)])
    assert stats.mean == pytest.approx((3.0 + 0.5) / 5)
    assert stats.std == pytest.approx(0.5)  # sample std-dev of 1.0, 0.5, 0.0, unweighted
    assert (stats.n, stats.n_not_evaluated) == (3, 1)


@pytest.mark.parametrize("pairs, mean, std, n, missing", [
    ([], None, None, 0, 0),
    ([(None, 1.0)], None, None, 0, 1),
    ([(0.7, 2.0)], 0.7, None, 1, 0),  # one score: no spread
    ([(0.2, 1.0), (0.4, 1.0)], 0.3, math.sqrt(0.02), 2, 0),
])
def test_model_stats_edges(pairs, mean, std, n, missing):
    stats = model_stats(pairs)
    assert stats.mean == (None if mean is None else pytest.approx(mean))
    assert stats.std == (None if std is None else pytest.approx(std))
    assert (stats.n, stats.n_not_evaluated) == (n, missing)


def test_run_stats_are_the_flat_mean_over_cells():
    stats = run_stats([1.0, 0.0, None, 0.5])
    assert stats.mean == pytest.approx(0.5) and stats.std == pytest.approx(0.5)
    assert (stats.n, stats.n_not_evaluated) == (3, 1)


@pytest.mark.parametrize("a, b, expected", [
    ([1, 0], [1, 0], 1.0), ([1, 0], [0, 1], 0.0), ([1, 0], [-1, 0], -1.0), ([1, 1], [1, 0], 1 / math.sqrt(2)),
    ([0, 0], [1, 0], None), ([], [], None), ([1, 2], [1, 2, 3], None),
])
def test_cosine_similarity(a, b, expected):
    value = cosine_similarity(a, b)
    assert value == (None if expected is None else pytest.approx(expected))


def test_similarity_to_ideal_embeds_both_texts_and_reports_failures_as_values():
    seen = []

    async def embed(texts):
        seen.append(list(texts))
        return [[3.0, 4.0], [4.0, 3.0]]

    async def broken(texts):
        return "HTTP 401 from openai: invalid key"

    async def short(texts):
        return [[1.0, 0.0]]

    assert asyncio.run(similarity_to_ideal(embed, "answer", "ideal")) == (pytest.approx(0.96), None)
    assert seen == [["answer", "ideal"]]
    assert asyncio.run(similarity_to_ideal(broken, "a", "i")) == (None, "embedding failed: HTTP 401 from openai: "
                                                                           "invalid key")
    assert asyncio.run(similarity_to_ideal(short, "a", "i"))[1] == "embedding failed: expected 2 vectors, got 1"


# --------------------------------------------------------------------------
# Agreement


def ratings(*scores_per_point, judges=("a", "b", "c")):
    return [[Rating(judge, score, f"test:{judge}", "holistic") for judge, score in zip(judges, scores)]
            for scores in scores_per_point]


def test_upstream_agreement_worked_by_hand():
    # Points (0, 1) and (1, 1): Do = (1 + 0) / 2 = 0.5; pooled 0,1,1,1: De = 3 / 6 = 0.5; alpha = 0.
    agreement = judge_agreement(ratings((0.0, 1.0), (1.0, 1.0)))
    assert agreement.krippendorffs_alpha == 0.0
    assert agreement.interpretation == "unreliable"  # pooled variance 0.1875 is not small
    assert (agreement.num_items, agreement.num_judges, agreement.num_comparisons) == (2, 2, 2)


def test_upstream_agreement_labels():
    assert judge_agreement(ratings((0.75, 0.75), (0.75, 0.75))).interpretation == "reliable"  # no variation
    assert judge_agreement(ratings((0.0, 0.0), (1.0, 1.0), (0.5, 0.5))).krippendorffs_alpha == 1.0
    # Do = 0.02 / 3; pooled 0, .1, 1, .9, .5, .5: De = 4.92 / 15; alpha = 0.9797 -> 0.98.
    near = judge_agreement(ratings((0.0, 0.1), (1.0, 0.9), (0.5, 0.5)))
    assert near.krippendorffs_alpha == 0.98 and near.interpretation == "reliable"
    # Do = 0.0625; De = 5.75 / 28; alpha = 0.696.
    middling = judge_agreement(ratings((0.0, 0.25), (1.0, 0.75), (0.5, 0.75), (0.75, 0.5)))
    assert middling.krippendorffs_alpha == 0.696 and middling.interpretation == "tentative"
    # Scores that barely vary: alpha near 0 says little, so "unstable" rather than "unreliable".
    flat = judge_agreement(ratings((0.5, 0.625), (0.5, 0.625), (0.625, 0.5), (0.5, 0.5), (0.625, 0.625)))
    assert flat.krippendorffs_alpha == -0.08 and flat.interpretation == "unstable"
    # The same alpha over scores that spread widely: "unreliable".
    spread = judge_agreement(ratings((0.0, 1.0), (0.0, 1.0), (1.0, 0.0), (0.0, 0.0), (1.0, 1.0)))
    assert spread.krippendorffs_alpha == -0.08 and spread.interpretation == "unreliable"


def test_agreement_needs_a_point_with_two_judges():
    assert judge_agreement([]) is None
    assert judge_agreement(ratings((0.5,), (1.0,))) is None


def test_judges_used_are_counted_and_fingerprinted_by_their_labels():
    points = ratings((0.5, 0.5, 1.0), (0.5, 1.0), judges=("a", "b", "c"))
    agreement = judge_agreement(points)
    assert [(u.judge_id, u.assessment_count) for u in agreement.judges_used] == [("a", 2), ("b", 2), ("c", 1)]
    assert agreement.num_judges == 3  # the first point's count, as upstream
    reordered = judge_agreement(ratings((1.0, 0.5, 0.5), judges=("c", "b", "a")))
    assert reordered.judge_set_fingerprint == agreement.judge_set_fingerprint
    assert len(agreement.judge_set_fingerprint) == 12
    assert judge_agreement(ratings((1.0, 0.5), judges=("a", "d"))).judge_set_fingerprint != \
        agreement.judge_set_fingerprint


# The textbook alpha against Krippendorff's own example (Computing Krippendorff's Alpha-Reliability,
# 2011: 4 observers, 12 units, interval alpha 0.849) and against the krippendorff package.
KRIPPENDORFF_EXAMPLE = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def test_textbook_alpha_matches_krippendorffs_published_example():
    assert krippendorff_alpha_interval(KRIPPENDORFF_EXAMPLE) == pytest.approx(0.849, abs=5e-4)


def _package_alpha(matrix):
    data = np.array([[np.nan if v is None else v for v in row] for row in matrix], dtype=float)
    return krippendorff.alpha(reliability_data=data, level_of_measurement="interval")


@pytest.mark.parametrize("seed", range(25))
def test_textbook_alpha_agrees_with_the_krippendorff_package(seed):
    rng = random.Random(seed)
    scale = [0.0, 0.25, 0.5, 0.75, 1.0] if seed % 2 else [0.0, 0.001, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 1.0]
    judges, points = rng.randint(2, 5), rng.randint(2, 30)
    matrix = [[rng.choice(scale) if rng.random() > 0.25 else None for _ in range(points)] for _ in range(judges)]
    matrix[0][0], matrix[1][0] = 0.0, 1.0  # at least one pairable point, with variation
    assert krippendorff_alpha_interval(matrix) == pytest.approx(_package_alpha(matrix), abs=1e-9)


def test_textbook_alpha_is_undefined_without_pairs_or_variation():
    assert krippendorff_alpha_interval([]) is None
    assert krippendorff_alpha_interval([[0.5, None], [None, 0.5]]) is None  # no point has two scores
    assert krippendorff_alpha_interval([[0.75, 0.75], [0.75, 0.75]]) is None  # nothing varies


def test_textbook_alpha_over_a_run_counts_the_points_it_rests_on():
    points = [
        [Rating("a", 0.0), Rating("b", 0.25)],
        [Rating("a", 1.0), Rating("b", 1.0), Rating("c", 0.75)],
        [Rating("c", 0.5)],  # one judge only: not counted
        [Rating("b", 0.5), Rating("c", 0.5)],
    ]
    result = textbook_alpha(points)
    assert (result.points, result.judges) == (3, 3)
    expected = _package_alpha([[0.0, 1.0, None], [0.25, 1.0, 0.5], [None, 0.75, 0.5]])
    assert result.alpha == pytest.approx(expected)
    assert result.to_dict() == {"krippendorffsAlphaInterval": result.alpha, "points": 3, "judges": 3}
