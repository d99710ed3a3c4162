"""Similarity of the models' answers: cosine per prompt averaged, average linkage, cophenetic correlation."""

import itertools

import numpy as np
import pytest

from runs.engine.similarity import dendrogram_svg, similarity


def _cos(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def _upgma(names, distance):
    """Average linkage by its definition: merge the closest clusters, the distance between two clusters the mean
    of every pairwise distance between their members."""
    clusters = [(n,) for n in names]
    merges = []
    while len(clusters) > 1:
        best = min(itertools.combinations(range(len(clusters)), 2),
                   key=lambda ij: np.mean([distance[a][b] for a in clusters[ij[0]] for b in clusters[ij[1]]]))
        a, b = clusters[best[0]], clusters[best[1]]
        merges.append((set(a), set(b), float(np.mean([distance[x][y] for x in a for y in b]))))
        clusters = [c for k, c in enumerate(clusters) if k not in best] + [a + b]
    return merges


def test_the_matrix_is_the_mean_cosine_and_the_tree_is_average_linkage():
    rng = np.random.default_rng(7)
    models = ["a", "b", "c", "d", "e"]
    answers = {f"p{i}": {m: rng.normal(size=8) for m in models} for i in range(6)}
    answers["p0"].pop("e")  # e did not answer p0: its means are over the other five prompts
    result = similarity(answers)
    for i, x in enumerate(result.models):
        for j, y in enumerate(result.models):
            if i == j:
                continue
            expected = np.mean([_cos(v[x], v[y]) for v in answers.values() if x in v and y in v])
            assert result.matrix[i][j] == pytest.approx(expected, abs=1e-12)
    distance = {x: {y: 1 - (result.matrix[i][j]) for j, y in enumerate(result.models)}
                for i, x in enumerate(result.models)}
    reference = _upgma(result.models, distance)
    assert [({*m.a}, {*m.b}) in ((r[0], r[1]), (r[1], r[0])) for m, r in zip(result.merges, reference)] == [True] * 4
    assert [m.distance for m in result.merges] == pytest.approx([r[2] for r in reference], abs=1e-12)
    assert -1 <= result.cophenetic <= 1


def test_two_models_with_identical_answers_are_the_first_merge_and_the_outlier_is_named():
    rng = np.random.default_rng(3)
    answers = {}
    for i in range(5):
        same = rng.normal(size=6)
        answers[f"p{i}"] = {"twin-1": same, "twin-2": same.copy(), "other": rng.normal(size=6),
                            "odd": -same + rng.normal(scale=0.01, size=6)}
    result = similarity(answers)
    assert {*result.merges[0].a, *result.merges[0].b} == {"twin-1", "twin-2"}
    assert result.merges[0].distance == pytest.approx(0, abs=1e-12)
    assert all(p.outlier == "odd" for p in result.per_prompt)
    svg = dendrogram_svg(result)
    assert svg.startswith("<svg") and "<script" not in svg and svg.count("<path") == 3


def test_labels_are_escaped_and_one_model_gives_no_tree():
    answers = {"p": {'<img src=x onerror=alert(1)>': [1, 0], "b": [0, 1], "c": [1, 1]}}
    svg = dendrogram_svg(similarity(answers))
    assert "<img" not in svg and "&lt;img" in svg
    assert similarity({"p": {"only": [1, 2]}}) is None
