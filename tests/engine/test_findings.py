"""Findings (runs/engine/findings.py): planted facts come out on top, each with its figure and its cells."""

from __future__ import annotations

from runs.engine.findings import Finding, findings, rank
from tests.fakes.insight_fixture import comparisons, planted


def test_each_planted_fact_is_among_the_top_three():
    matrix, points, report, _ = planted()
    found = findings(matrix, comparisons(matrix), points, report)
    top = found[:3]
    assert {f.kind for f in top} == {"should_not", "identical", "refusal"}, [f.text for f in found[:6]]
    should_not = next(f for f in top if f.kind == "should_not")
    assert should_not.models == ["unsafe"] and should_not.value == 1.0 and "every should-not point" in should_not.text
    identical = next(f for f in top if f.kind == "identical")
    assert identical.models == ["twin-a", "twin-b"] and identical.value == 1.0
    refusal = next(f for f in top if f.kind == "refusal")
    assert refusal.models == ["refuser"] and refusal.value == 0.2 and len(refusal.cells) == 4
    assert [f.id for f in found] == [f"F{i}" for i in range(1, len(found) + 1)]
    for f in found:
        assert f.cells and all(p in {c[0] for c in f.cells} for p in f.prompts)


def test_a_significant_difference_is_a_finding_and_cant_tell_is_not():
    matrix, points, report, _ = planted()
    found = findings(matrix, comparisons(matrix), [], None)
    differences = [f for f in found if f.kind == "difference"]
    assert differences and all("unsafe" in f.models for f in differences)
    assert all(f.models[1] == "unsafe" for f in differences)  # the better model first


def test_a_finding_that_repeats_cells_already_cited_is_dropped():
    a = Finding("difference", "x", 0.5, ["m"], ["p"], [("p", "m")], 2.0)
    b = Finding("worst_failure", "y", 0.1, ["m"], ["p"], [("p", "m")], 1.0)
    c = Finding("worst_failure", "z", 0.1, ["n"], ["p"], [("p", "n")], 0.9)
    assert [f.text for f in rank([b, a, c])] == ["x", "z"]
