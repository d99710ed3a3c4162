"""Two runs' cells side by side, as NumPy columns: what the compare page reads of each run's matrix
(``matrix.CellFigures``), matched by prompt id and model variant, giving the figures that the loops over
``{prompt id: score}`` dicts gave, in the same order and to the bit (held to those loops by
tests/runs/test_compare_columns.py). Loops per cell over 20,000 cells were most of a big compare's first view.
No Django here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np

from . import stats
from .scoring import round2


@dataclass(frozen=True, eq=False)
class CellColumns:
    """A run's cells in the matrix's cell order: prompt position, model variant (its place in ``names``), score and
    shown score (NaN: none), response id (-1: none). A cell's prompt id is ``prompt_ids[index]`` (``str(index)``
    past its end, as ``Cell.prompt_id``)."""

    index: np.ndarray
    variant: np.ndarray
    score: np.ndarray
    shown: np.ndarray
    response: np.ndarray
    names: list[str]
    prompt_ids: Sequence[str]

    def cells(self) -> list[tuple[int, str, str, float | None, float | None, int | None]]:
        """As ``CellFigures.cells``: ``(prompt index, prompt id, variant id, score, shown, response id)``."""
        ids, names, count = self.prompt_ids, self.names, len(self.prompt_ids)
        return [(i, ids[i] if 0 <= i < count else str(i), names[v], None if s != s else s, None if h != h else h,
                 None if r < 0 else r)
                for i, v, s, h, r in zip(self.index.tolist(), self.variant.tolist(), self.score.tolist(),
                                         self.shown.tolist(), self.response.tolist())]


def _floats(values: list) -> np.ndarray:
    return np.array(values, dtype=float) if values else np.zeros(0)  # None -> NaN


def _ids(values: list) -> np.ndarray:
    found = _floats(values)  # ids are below 2**53: exact as floats
    return np.where(np.isnan(found), -1, found).astype(np.int64)


def columns_of_stored(stored: dict, prompt_ids: Sequence[str]) -> CellColumns:
    """From the stored form (``matrix.cell_figures_json``)."""
    return CellColumns(np.array(stored["index"], dtype=np.int64), np.array(stored["variant"], dtype=np.int64),
                       _floats(stored["score"]), _floats(stored["shown"]), _ids(stored["response"]),
                       list(stored["names"]), prompt_ids)


def columns_of_cells(variants: Sequence[str], cells: Sequence[tuple]) -> CellColumns:
    """From ``CellFigures.cells`` (names: ``variants``, then any other variant with a cell, as the stored form)."""
    at = {v: i for i, v in enumerate(variants)}
    ids: dict[int, str] = {}
    for index, prompt_id, v, *_ in cells:
        at.setdefault(v, len(at))
        ids[index] = prompt_id
    table = [ids.get(i, str(i)) for i in range(max((i for i in ids if i >= 0), default=-1) + 1)]
    return CellColumns(np.array([c[0] for c in cells], dtype=np.int64),
                       np.array([at[c[2]] for c in cells], dtype=np.int64), _floats([c[3] for c in cells]),
                       _floats([c[4] for c in cells]), _ids([c[5] for c in cells]), list(at), table)


def round2_many(values: np.ndarray) -> np.ndarray:
    """``scoring.round2`` of each value (NaN stays NaN). A value within a millionth of a step of a 2-place number
    rounds to that number, which ``k / 100`` is to the bit (both the float nearest it); the few others (halves at
    the last place, unrounded values) go through ``round2`` one by one."""
    values = np.asarray(values, dtype=float)
    scaled = values * 100
    whole = np.rint(scaled)
    out = whole / 100 + 0.0  # -0.0 prints as 0, as round2 makes it
    with np.errstate(invalid="ignore"):
        near = np.abs(scaled - whole) < 1e-6
    for i in np.flatnonzero(~near & np.isfinite(values)).tolist():
        out[i] = round2(float(values[i]))
    return out


@dataclass(frozen=True, eq=False)
class SideBySide:
    """What ``side_by_side`` found. Codes: ``prompt`` into ``ids``, ``variant`` into ``names``.

    ``cells``: every cell of either run (the base's in its order, then those only in the run), sorted as the
    compare page lists them (largest regression first, unmatched last): ``prompt``, ``variant``, ``index`` (the
    run's prompt position, else the base's), ``before``/``after`` (shown scores, NaN: none), ``before_id``/
    ``after_id`` (-1: none), ``delta`` (``round2(after - before)``, NaN: not both scored).
    ``comparisons``: per common variant, the paired comparison (``stats.paired_many``'s); ``aligned``: per common
    variant, the gate's ``(xs, ys, weights)`` (``stats.align``'s order); ``changes``: the cells scored in both
    (prompts left out aside), unrounded ``after - before``, in the order of ``common`` then the run's cells, with
    ``changes_at``: ``(prompt, variant, index, before shown, after shown)`` of each."""

    ids: list[str]
    names: list[str]
    cells: dict[str, np.ndarray]
    comparisons: list[stats.Comparison]
    aligned: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
    changes: np.ndarray
    changes_at: dict[str, np.ndarray]


def _last_of_each(keys: np.ndarray) -> np.ndarray | None:
    """Where keys repeat, as a dict filled in order keeps them: each key at its first place with its last value.
    Returns the rows to keep (the last of each key, in the order of each key's first), None when none repeat."""
    unique, first = np.unique(keys, return_index=True)
    if len(unique) == len(keys):
        return None
    _, from_end = np.unique(keys[::-1], return_index=True)
    return (len(keys) - 1 - from_end)[np.argsort(first, kind="stable")]


def _keep(cols: CellColumns, codes: np.ndarray, variants: np.ndarray) -> dict[str, np.ndarray]:
    side = {"prompt": codes, "variant": variants, "index": cols.index, "score": cols.score, "shown": cols.shown,
            "response": cols.response}
    rows = _last_of_each(codes * max(1, int(variants.max(initial=0)) + 1) + variants)
    return side if rows is None else {k: v[rows] for k, v in side.items()}


def side_by_side(after: CellColumns, before: CellColumns, common: Sequence[str],
                 weights: Mapping[str, float | None], left_out: Iterable[str] = ()) -> SideBySide:
    """The run's cells (``after``) against the base's (``before``), matched by (prompt id, model variant): what
    ``runs.compare`` shows of two runs. ``common``: the variants compared (in the run's column order);
    ``weights``: prompt weights by id; ``left_out``: prompt ids whose content changed."""
    code: dict[str, int] = {}
    names: dict[str, int] = {}

    def prompt_codes(cols: CellColumns) -> np.ndarray:
        table = np.array([code.setdefault(p, len(code)) for p in cols.prompt_ids], dtype=np.int64)
        index = cols.index
        inside = (index >= 0) & (index < len(table))
        if bool(inside.all()):
            return table[index]
        out = np.empty(len(index), dtype=np.int64)
        out[inside] = table[index[inside]]
        out[~inside] = [code.setdefault(str(i), len(code)) for i in index[~inside].tolist()]
        return out

    def variant_codes(cols: CellColumns) -> np.ndarray:
        table = np.array([names.setdefault(v, len(names)) for v in cols.names], dtype=np.int64)
        return table[cols.variant]

    a = _keep(after, prompt_codes(after), variant_codes(after))
    b = _keep(before, prompt_codes(before), variant_codes(before))
    ids, variants = list(code), list(names)
    width = max(1, len(variants))
    key_a, key_b = a["prompt"] * width + a["variant"], b["prompt"] * width + b["variant"]
    order_b = np.argsort(key_b, kind="stable")
    place = np.minimum(np.searchsorted(key_b[order_b], key_a), max(0, len(key_b) - 1))
    hit = (key_b[order_b][place] == key_a) if len(key_b) else np.zeros(len(key_a), dtype=bool)
    match = np.where(hit, order_b[place] if len(key_b) else 0, -1)  # the base's row of each of the run's cells
    in_after = np.full(len(key_b), -1, dtype=np.int64)
    in_after[match[hit]] = np.flatnonzero(hit)

    # Every cell, the base's first: {**before, **after}.
    only_a = np.flatnonzero(~hit)
    has_a = in_after >= 0
    a_rows = np.concatenate([np.where(has_a, in_after, 0), only_a])
    a_there = np.concatenate([has_a, np.ones(len(only_a), dtype=bool)])
    b_rows = np.concatenate([np.arange(len(key_b)), np.zeros(len(only_a), dtype=np.int64)])
    b_there = np.concatenate([np.ones(len(key_b), dtype=bool), np.zeros(len(only_a), dtype=bool)])

    def pick(side, rows, there, name, empty):
        values = side[name][rows] if len(side[name]) else np.zeros(len(rows), dtype=side[name].dtype)
        return np.where(there, values, empty)

    cells = {"prompt": np.concatenate([b["prompt"], a["prompt"][only_a]]),
             "variant": np.concatenate([b["variant"], a["variant"][only_a]]),
             "index": np.where(a_there, pick(a, a_rows, a_there, "index", 0), pick(b, b_rows, b_there, "index", 0)),
             "before": pick(b, b_rows, b_there, "shown", np.nan), "after": pick(a, a_rows, a_there, "shown", np.nan),
             "before_id": pick(b, b_rows, b_there, "response", -1),
             "after_id": pick(a, a_rows, a_there, "response", -1)}
    delta = round2_many(cells["after"] - cells["before"])
    cells["delta"] = delta
    none = np.isnan(delta)
    rank = np.empty(len(variants), dtype=np.int64)
    rank[np.argsort(np.array(variants, dtype=object), kind="stable")] = np.arange(len(variants))
    order = np.lexsort((rank[cells["variant"]] if len(variants) else cells["variant"], cells["index"],
                        np.where(none, 0.0, delta), none))
    cells = {k: v[order] for k, v in cells.items()}

    # The cells scored in both runs, per common variant (prompts left out aside).
    skip = np.zeros(len(ids), dtype=bool)
    skip[[code[p] for p in set(left_out) if p in code]] = True
    b_score = np.where(hit, b["score"][match] if len(key_b) else np.nan, np.nan)
    b_shown = np.where(hit, b["shown"][match] if len(key_b) else np.nan, np.nan)
    slot = np.full(len(variants), len(common), dtype=np.int64)
    for j, v in enumerate(common):
        if v in names:
            slot[names[v]] = j
    column = slot[a["variant"]] if len(a["variant"]) else np.zeros(0, dtype=np.int64)
    paired = hit & ~skip[a["prompt"]] & (column < len(common))
    scored = paired & ~np.isnan(a["score"]) & ~np.isnan(b_score)
    by_id = np.empty(len(ids), dtype=np.int64)  # a prompt id's place among the ids in ``str`` order
    by_id[np.argsort(np.array(ids, dtype=object), kind="stable")] = np.arange(len(ids))
    items = np.unique(by_id[a["prompt"][paired]])  # resampled: in both, scored or not (stats.paired_many)
    weight = np.array([stats.item_weight(weights.get(p)) for p in ids], dtype=float)
    sides, aligned = [], {}
    for j, v in enumerate(common):
        rows = np.flatnonzero(scored & (column == j))
        rows = rows[np.argsort(by_id[a["prompt"][rows]], kind="stable")]
        xs, ys, ws = a["score"][rows], b_score[rows], weight[a["prompt"][rows]]
        sides.append((np.searchsorted(items, by_id[a["prompt"][rows]]), xs, ys, ws))
        aligned[v] = (xs, ys, ws)
    comparisons = stats.paired_sides(len(items), sides)

    tested = np.flatnonzero(scored)
    tested = tested[np.argsort(column[tested], kind="stable")]
    changes_at = {"prompt": a["prompt"][tested], "variant": a["variant"][tested], "index": a["index"][tested],
                  "before": b_shown[tested], "after": a["shown"][tested]}
    return SideBySide(ids, variants, cells, comparisons, aligned, a["score"][tested] - b_score[tested], changes_at)
