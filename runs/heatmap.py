"""The prompts x models heatmap: a page of the run's matrix, models best first."""

from __future__ import annotations

from dataclasses import dataclass

from runs.engine.matrix import Cell, Matrix, prompt_summary

HEATMAP_PAGE_SIZE = 100
HEATMAP_SORTS = {"order": "Blueprint order", "lowest": "Lowest mean first", "spread": "Most spread first"}


@dataclass
class Column:
    variant_id: str
    rank: int | None
    mean: float | None
    std: float | None


@dataclass
class Row:
    index: int
    prompt_id: str
    summary: str
    weight: float | None
    cells: list[Cell | None]
    mean: float | None


def columns(matrix: Matrix) -> list[Column]:
    """The matrix's columns (best mean first), ranked while they have a mean."""
    out = []
    for i, v in enumerate(matrix.variants):
        s = matrix.summaries[v]
        out.append(Column(v, i + 1 if s.mean is not None else None, s.mean, s.std))
    return out


def rows(matrix: Matrix, indices: list[int]) -> list[Row]:
    return [Row(i, matrix.prompts[i].id, prompt_summary(matrix.prompts[i], 90), matrix.prompts[i].weight,
                matrix.row(i), matrix.row_mean(i)) for i in indices if 0 <= i < len(matrix.prompts)]
