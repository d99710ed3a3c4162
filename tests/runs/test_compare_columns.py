"""Compare's figures off NumPy columns (``runs.engine.cellcompare``, ``runs.compare.compared_figures``) held to the
loops over ``{prompt id: score}`` dicts they replaced, kept here as the reference, to the bit: every cell's change
and its order, the cells listed under the FDR rule, the paired comparisons, the gate, the movement. Over small
random pairs of runs with ties, unscored cells, most cells unmoved (cached), prompts and variants in one run only,
prompts left out, odd prompt weights, and a cell whose prompt id repeats another's."""

from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pytest

from runs import compare as run_compare
from runs.engine import stats
from runs.engine.cellcompare import columns_of_cells, columns_of_stored, round2_many
from runs.engine.matrix import CellFigures, cell_figures_json, cell_figures_of
from runs.engine.scoring import round2

# --- the reference: the loops compare.py ran before ---------------------------------------------------------------


def ref_paired_many(pairs, weights, exclude=()):
    left_out = set(exclude)
    items = sorted({k for a, b in pairs for k in a if k in b and k not in left_out}, key=str)
    index = {k: i for i, k in enumerate(items)}
    diffs, w = np.zeros((len(items), len(pairs))), np.zeros((len(items), len(pairs)))
    sides = []
    for j, (a, b) in enumerate(pairs):
        ids, xs, ys = stats.align(a, b, left_out)
        for k, x, y in zip(ids, xs, ys):
            weight = weights.get(k)
            diffs[index[k], j] = x - y
            w[index[k], j] = 1.0 if weight is None else max(0.0, float(weight))
        sides.append((ids, xs, ys))
    out = []
    results = stats.bootstrap_means(diffs, w) if items else [(None, None, None)] * len(pairs)
    for j, (delta, low, high) in enumerate(results):
        ids, xs, ys = sides[j]
        ws = [w[index[k], j] for k in ids]
        binary = stats.paired_binary_interval(np.array(xs), np.array(ys), np.array(ws)) if ids else None
        if binary is not None:
            low, high = binary
        total = sum(ws)
        mean_a = sum(x * v for x, v in zip(xs, ws)) / total if total else None
        mean_b = sum(y * v for y, v in zip(ys, ws)) / total if total else None
        out.append(stats.Comparison(delta, low, high, len(ids), stats.verdict(low, high), mean_a, mean_b))
    return out


def ref_figures(after_m: CellFigures, before_m: CellFigures, weights: dict, changed_ids: list[str]) -> dict:
    def cells_of(figures):
        return {(pid, v): (shown, index, response) for index, pid, v, _, shown, response in figures.cells}

    def scores_of(figures):
        out = {v: {} for v in figures.variants}
        for _, pid, v, score, _, _ in figures.cells:
            out.setdefault(v, {})[pid] = score
        return out

    after, before = scores_of(after_m), scores_of(before_m)
    common = [v for v in after_m.variants if v in before]
    results = ref_paired_many([(after[v], before[v]) for v in common], weights, changed_ids)
    pairs = [run_compare.Pair(v, v, c, after_m.trials.get(v), before_m.trials.get(v)) for v, c in zip(common, results)]
    aligned = {}
    for v in common:
        ids, xs, ys = stats.align(after[v], before[v], changed_ids)
        aligned[v] = (xs, ys, [weights.get(k) for k in ids])
    gate = stats.gate(aligned, {p.a: p.verdict for p in pairs})
    skip = set(changed_ids)
    deltas = {}
    for v in common:
        for prompt_id, score in after[v].items():
            old = before[v].get(prompt_id)
            if score is not None and old is not None and prompt_id not in skip:
                deltas[(prompt_id, v)] = score - old
    cells_after, cells_before = cells_of(after_m), cells_of(before_m)
    listed = [run_compare.ListedChange(c.key[0], cells_after[c.key][1], c.key[1], cells_before[c.key][0],
                                       cells_after[c.key][0], c.delta, c.q) for c in stats.changed(deltas) if c.changed]
    changes = []
    for key in {**cells_before, **cells_after}:
        b, a = cells_before.get(key), cells_after.get(key)
        changes.append(run_compare.Change(key[0], (a or b)[1], key[1], b[0] if b else None, a[0] if a else None,
                                          b[2] if b else None, a[2] if a else None))
    changes.sort(key=lambda c: (c.delta is None, c.delta if c.delta is not None else 0, c.prompt_index,
                                c.variant_id))
    return {"pairs": pairs, "changes": changes, "listed": listed, "tested": len(deltas),
            "only_run": [v for v in after_m.variants if v not in before],
            "only_base": [v for v in before_m.variants if v not in after], "gate": gate,
            "movement": stats.movement(deltas)}


# --- random runs ----------------------------------------------------------------------------------------------------


def random_figures(rng: random.Random, prompt_ids: list[str], variants: list[str], base: dict | None, *,
                   cached: float, binary: bool) -> tuple[CellFigures, dict]:
    """A run's cell figures: each prompt x variant cell (some missing, some unscored); with ``base`` (the other
    run's scores by (prompt id, variant)), a share ``cached`` of cells keep the base's score."""
    cells, scores = [], {}
    for index, pid in enumerate(prompt_ids):
        for v in variants:
            if rng.random() < 0.08:
                continue  # no cell
            if rng.random() < 0.1:
                score = None
            elif base is not None and (pid, v) in base and rng.random() < cached:
                score = base[(pid, v)]
            elif binary:
                score = float(rng.random() < 0.6)
            else:
                score = rng.choice([rng.random(), round(rng.random() * 4) / 4, 1 / 3, 0.625, 0.125])
            scores[(pid, v)] = score
            cells.append((index, pid, v, score, None if score is None else round2(score),
                          None if rng.random() < 0.02 else rng.randrange(1, 10**6)))
    rng.shuffle(cells)
    if rng.random() < 0.3 and len(prompt_ids) > 3:  # a cell past the revision's prompts: its id is str(index)
        cells.append((len(prompt_ids) + 1, str(len(prompt_ids) + 1), variants[0], 0.5, 0.5, 7))
    trials = {v: stats.TrialFigures(0, None, None, None) for v in variants}
    return CellFigures(list(variants), cells, trials), scores


def case(seed: int):
    """A run's and its base's cell figures, prompt weights and prompts left out; and what the case has in it."""
    rng = random.Random(seed)
    n = rng.choice([1, 2, 3, 5, 12, 30, 80])
    # Prompt ids whose ``str`` order is not their place (q10 before q2), one that is a number as a cell past the
    # prompts would be named, and each run with prompts of its own.
    ids = [f"q{i}" for i in range(n)] + (["5"] if rng.random() < 0.3 else [])
    base_ids = [p for p in ids if rng.random() < 0.9] + ["base-only"]
    run_ids = [p for p in ids if rng.random() < 0.9] + ["run-only"]
    variants = ["m:b", "m:a", "m:c"]
    binary = seed % 5 == 0  # pass/fail scores of equal weight: Newcombe's interval
    cached = rng.choice([0.0, 0.5, 0.9, 1.0])
    before, scores = random_figures(rng, base_ids, [v for v in variants if v != "m:c"] + ["m:old"], None,
                                    cached=0, binary=binary)
    after, _ = random_figures(rng, run_ids, variants, scores, cached=cached, binary=binary)
    weights = {} if binary else {p: rng.choice([None, None, 1, 2.5, 0, -1]) for p in run_ids}
    left_out = [p for p in run_ids if rng.random() < 0.1]
    return after, before, weights, left_out


def as_rows(figures: dict) -> dict:
    out = dict(figures)
    out["changes"] = [dataclasses.astuple(c) + (c.delta,) for c in figures["changes"]]
    out["listed"] = [dataclasses.astuple(c) for c in figures["listed"]]
    return out


@pytest.mark.parametrize("seed", range(60))
def test_compare_off_columns_is_the_dict_loops_to_the_bit(seed):
    after, before, weights, left_out = case(seed)
    expected = ref_figures(after, before, weights, left_out)
    found = run_compare.compared_figures(after, before, weights, left_out)
    assert as_rows(found) == as_rows(expected)
    for mine, theirs in zip(found["pairs"], expected["pairs"]):  # np.float64 both: the same sums, in order
        assert type(mine.mean_a) is type(theirs.mean_a) and type(mine.delta) is type(theirs.delta)
    assert found["changes"][2:5] == expected["changes"][2:5] and found["changes"][-1] == expected["changes"][-1]
    deltas = [c.delta for c in expected["changes"] if c.delta is not None]
    assert found["changes"].counts == {
        "worse": sum(d < 0 for d in deltas), "better": sum(d > 0 for d in deltas),
        "same": sum(d == 0 for d in deltas), "unmatched": len(expected["changes"]) - len(deltas)}


def test_the_cases_cover_what_they_say():
    """Listed cells, unmoved ones, unmatched ones, a repeated prompt id, a left-out prompt and pass/fail pairs
    under Newcombe's interval all occur."""
    seen = dict.fromkeys(("listed", "unmoved", "unmatched", "repeated", "left out", "newcombe"), 0)
    for seed in range(60):
        after, before, weights, left_out = case(seed)
        found = ref_figures(after, before, weights, left_out)
        seen["listed"] += bool(found["listed"])
        seen["unmoved"] += any(c.delta == 0 for c in found["changes"])
        seen["unmatched"] += any(c.before is None or c.after is None for c in found["changes"])
        keys = [(pid, v) for _, pid, v, *_ in after.cells]
        seen["repeated"] += len(set(keys)) < len(keys)
        seen["left out"] += bool(left_out)
        seen["newcombe"] += not weights and any(p.n >= 2 for p in found["pairs"])
    assert all(seen.values()), seen


def test_cells_and_columns_come_back_as_each_other():
    from types import SimpleNamespace

    after, *_ = case(7)
    assert columns_of_cells(after.variants, after.cells).cells() == after.cells
    n = max(i for i, *_ in after.cells) + 1
    ids = {i: pid for i, pid, *_ in after.cells}
    prompts = [SimpleNamespace(id=ids.get(i, f"none-{i}")) for i in range(n - 2)]  # the last cells past the prompts
    cells = [(i, prompts[i].id if i < len(prompts) else str(i), *rest) for i, _, *rest in after.cells]
    figures = CellFigures(after.variants, cells, after.trials)
    back = cell_figures_of(cell_figures_json(figures), prompts)
    assert back == figures and back.cells == cells
    again = columns_of_stored(cell_figures_json(figures), [p.id for p in prompts])
    assert again.names == figures.columns.names and again.cells() == cells
    assert np.array_equal(again.score, figures.columns.score, equal_nan=True)


VALUES = [0.125, 0.375, 0.625, -0.125, -0.625, 1.005, 2.675, 0.585, 0.595, 0.0, -0.0, 1e-17, -1e-17, 0.3 - 0.1,
          0.7 - 0.69, 1 / 3, -2 / 3, 1e6 + 0.005, 123456.785, float("inf"), float("-inf"), 5e-324, 0.995, -0.995]


def test_round2_many_is_round2_to_the_bit():
    rng = np.random.default_rng(3)
    shown = np.round(rng.uniform(0, 1, 4000), 2)
    values = np.concatenate([VALUES, rng.normal(0, 1, 4000), shown[:2000] - shown[2000:],
                             rng.integers(-400, 400, 2000) / 200, rng.integers(-400, 400, 2000) / 100])
    got = round2_many(values)
    for value, mine in zip(values.tolist(), got.tolist()):
        theirs = round2(value)
        assert mine == theirs and math.copysign(1, mine) == math.copysign(1, theirs), (value, mine, theirs)
    assert np.isnan(round2_many(np.array([np.nan]))[0])


def test_weights_given_as_an_array_are_weighed_as_a_list():
    w = np.array([1.0, 0.0, -2.0, 2.5, np.nan, -0.0])
    assert np.array_equal(stats._weights(w, 6), stats._weights(w.tolist(), 6))  # noqa: SLF001
    assert np.array_equal(stats._weights(w, 6), [1.0, 0.0, 0.0, 2.5, 0.0, 0.0])  # noqa: SLF001


@pytest.mark.parametrize("which", ["both empty", "run empty", "base empty", "no variant in common"])
def test_edges_are_the_dict_loops(which):
    trials = {"m:a": stats.TrialFigures(0, None, None, None)}
    some = CellFigures(["m:a"], [(0, "q0", "m:a", 0.5, 0.5, 1), (1, "q1", "m:a", None, None, 2),
                                 (2, "q2", "m:a", 1.0, 1.0, 3)], trials)
    other = CellFigures(["m:b"], [(0, "q0", "m:b", 0.25, 0.25, 4)], {})
    empty = CellFigures([], [], {})
    after, before = {"both empty": (empty, empty), "run empty": (empty, some), "base empty": (some, empty),
                     "no variant in common": (some, other)}[which]
    expected = ref_figures(after, before, {}, [])
    assert as_rows(run_compare.compared_figures(after, before, {}, [])) == as_rows(expected)
