"""How alike the models' answers are: per prompt the cosine similarity of their final answers' embeddings,
averaged over prompts, and a dendrogram of the models.

The tree is built by **average linkage** (UPGMA) on cosine distance, ``1 - similarity``. Average linkage needs
no more of a distance than that it is one number per pair; Ward linkage (the upstream's choice) minimises a sum
of squared Euclidean distances and is only right for Euclidean distances, which ``1 - cosine`` is not. How well
the tree keeps the distances is its cophenetic correlation (1: the tree is the distances; under ~0.7 read the
tree with care), printed beside it. SciPy does the arithmetic (``scipy.cluster.hierarchy``). Pure Python.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from typing import Mapping, Sequence

import numpy as np


@dataclass(frozen=True)
class Merge:
    a: tuple[str, ...]
    b: tuple[str, ...]
    distance: float

    def to_dict(self) -> dict:
        return {"a": list(self.a), "b": list(self.b), "distance": round(self.distance, 6)}


@dataclass(frozen=True)
class PromptConsistency:
    prompt_id: str
    mean_similarity: float  # over every pair of models that answered it
    outlier: str | None  # the model least like the others (None with fewer than three answers)
    outlier_similarity: float | None  # its mean similarity to the others


@dataclass
class Similarity:
    models: list[str]
    matrix: list[list[float | None]]  # mean cosine similarity over the prompts both answered (1 on the diagonal)
    prompts_compared: list[list[int]]  # how many prompts each mean is over
    merges: list[Merge]  # in merge order
    cophenetic: float | None  # correlation of the tree's distances with the distances it was built from
    per_prompt: list[PromptConsistency] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"models": list(self.models),
                "matrix": [[None if x is None else round(x, 6) for x in row] for row in self.matrix],
                "merges": [m.to_dict() for m in self.merges],
                "cophenetic": None if self.cophenetic is None else round(self.cophenetic, 6),
                "linkage": "average (UPGMA) on 1 - cosine similarity"}


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


def similarity(answers: Mapping[str, Mapping[str, Sequence[float]]]) -> Similarity | None:
    """``answers``: prompt id -> variant id -> the embedding of that model's final answer to it.
    None when fewer than two models answered anything."""
    models = sorted({v for by_model in answers.values() for v in by_model})
    if len(models) < 2:
        return None
    index = {m: i for i, m in enumerate(models)}
    total = np.zeros((len(models), len(models)))
    counts = np.zeros((len(models), len(models)), dtype=int)
    per_prompt = []
    for prompt_id, by_model in answers.items():
        present = [m for m in models if m in by_model]
        if len(present) < 2:
            continue
        vectors = _unit_rows(np.asarray([by_model[m] for m in present], dtype=float))
        sims = np.clip(vectors @ vectors.T, -1.0, 1.0)
        ids = [index[m] for m in present]
        total[np.ix_(ids, ids)] += sims
        counts[np.ix_(ids, ids)] += 1
        upper = sims[np.triu_indices(len(present), 1)]
        outlier = outlier_similarity = None
        if len(present) >= 3:
            others = (sims.sum(axis=1) - 1.0) / (len(present) - 1)
            worst = int(np.argmin(others))
            outlier, outlier_similarity = present[worst], float(others[worst])
        per_prompt.append(PromptConsistency(prompt_id, float(upper.mean()), outlier, outlier_similarity))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(counts > 0, total / np.maximum(counts, 1), np.nan)
    np.fill_diagonal(mean, 1.0)
    matrix = [[None if math.isnan(x) else float(x) for x in row] for row in mean]
    merges, cophenetic = _tree(models, mean)
    per_prompt.sort(key=lambda p: p.mean_similarity)
    return Similarity(models, matrix, counts.tolist(), merges, cophenetic, per_prompt)


def _tree(models: list[str], mean: np.ndarray) -> tuple[list[Merge], float | None]:
    from scipy.cluster.hierarchy import cophenet, linkage
    from scipy.spatial.distance import squareform

    distance = 1.0 - mean
    # A pair that never answered the same prompt has no distance: it is placed as far as any pair can be.
    distance = np.where(np.isnan(distance), 2.0, np.clip(distance, 0.0, 2.0))
    distance = (distance + distance.T) / 2
    np.fill_diagonal(distance, 0.0)
    condensed = squareform(distance, checks=False)
    z = linkage(condensed, method="average")
    clusters: list[tuple[str, ...]] = [(m,) for m in models]
    merges = []
    for left, right, height, _ in z:
        a, b = clusters[int(left)], clusters[int(right)]
        merges.append(Merge(a, b, float(height)))
        clusters.append(a + b)
    cophenetic = None
    if len(models) >= 3 and np.ptp(condensed) > 0:
        cophenetic = float(cophenet(z, condensed)[0])
    return merges, cophenetic


def dendrogram_svg(result: Similarity, *, width: int = 560, row: int = 22, label_width: int = 260) -> str:
    """The tree as inline SVG (no script, no outside reference): leaves down the left, merges to the right at
    their distance; every label escaped."""
    order: list[str] = list(result.merges[-1].a + result.merges[-1].b) if result.merges else list(result.models)
    y_of = {m: (i + 0.5) * row for i, m in enumerate(order)}
    top = max((m.distance for m in result.merges), default=1.0) or 1.0
    span = width - label_width - 20

    def x_of(distance: float) -> float:
        return label_width + 10 + span * distance / top

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="dendrogram" role="img" width="{width}" '
             f'height="{int(row * len(order) + 24)}" viewBox="0 0 {width} {int(row * len(order) + 24)}">',
             '<title>Models grouped by how alike their answers are (average linkage on 1 - cosine)</title>']
    for m in order:
        parts.append(f'<text x="{label_width}" y="{y_of[m] + 4:.1f}" text-anchor="end" font-size="12">'
                     f'{escape(m)}</text>')
    x_at = {(m,): float(label_width + 10) for m in order}
    y_at = {(m,): y_of[m] for m in order}
    for merge in result.merges:
        x = x_of(merge.distance)
        ya, yb = y_at[merge.a], y_at[merge.b]
        parts.append(f'<path d="M{x_at[merge.a]:.1f},{ya:.1f}H{x:.1f}V{yb:.1f}H{x_at[merge.b]:.1f}" '
                     'fill="none" stroke="currentColor" stroke-width="1.5"/>')
        key = merge.a + merge.b
        x_at[key], y_at[key] = x, (ya + yb) / 2
    axis_y = row * len(order) + 16
    parts.append(f'<text x="{label_width + 10}" y="{axis_y:.1f}" font-size="11">0</text>')
    parts.append(f'<text x="{width - 10}" y="{axis_y:.1f}" font-size="11" text-anchor="end">'
                 f'distance {top:.2f}</text>')
    parts.append("</svg>")
    return "".join(parts)
