"""Decisions on the pages: the compare page's per-variant difference with its interval and verdict and the cells
that changed under the FDR rule; each model's mean with its interval on the run page, the grid and the compare
page. Runs are made through the production path against the fake LLM server; every figure is held to
``runs.engine.stats`` over the matrix's cell scores."""

from __future__ import annotations

import re
from html import unescape

import pytest

from runs import compare as run_compare
from runs.engine import stats
from runs.records import run_matrix
from runs.spec import parsed_blueprint
from tests.cli.test_compare_command import A, B, PROMPTS, _run, blueprint  # noqa: F401
from tests.fakes.pytest_fixtures import fake_llm, fake_llm_server, fake_provider  # noqa: F401
from tests.web.conftest import htmx

pytestmark = pytest.mark.django_db(transaction=True)


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_the_compare_page_shows_each_variants_difference_interval_and_verdict(fake_provider, blueprint, client):
    base = _run(fake_provider, blueprint)
    later = _run(fake_provider, blueprint, a_bad=(2, 5, 8, 11))
    html = client.get(f"/runs/{later.pk}/compare?with={base.pk}").content.decode()
    table = re.search(r'<table class="decisions-table">.*?</table>', html, re.S).group(0)
    rows = {re.search(r"<code>(.*?)</code>", r).group(1): _text(r)
            for r in re.findall(r'<tr class="pair[^"]*">(.*?)</tr>', table, re.S)}
    found = run_compare.compare_with_base(later, base)
    pair = next(p for p in found.pairs if p.a == A)
    assert pair.verdict == "worse" and pair.delta == pytest.approx(-4 / PROMPTS)
    assert f"1.00 0.67 -0.33 {pair.low:.2f} to {pair.high:.2f} {PROMPTS} worse" in rows[A]
    assert "+" not in rows[B] and "can't tell" in rows[B]
    # The cells that changed, under the FDR rule (said on the page), each with its diff.
    assert "Benjamini–Hochberg false-discovery rule at 1%" in html
    listed = re.findall(r'<tr class="listed">(.*?)</tr>', html, re.S)
    assert sorted(re.search(r"<code>(q\d\d)</code>", r).group(1) for r in listed) == ["q02", "q05", "q08", "q11"]
    assert all(f"/runs/{later.pk}/compare/{base.pk}/diff?prompt=" in r for r in listed)


def test_the_figures_are_the_engines_over_the_matrix_cell_scores(fake_provider, blueprint):
    base = _run(fake_provider, blueprint, b_bad=(1,))
    later = _run(fake_provider, blueprint, a_bad=(0, 3), b_bad=(1, 2))
    found = run_compare.compare_with_base(later, base)
    prompts = parsed_blueprint(later.revision).prompts
    after, before = run_matrix(later, prompts), run_matrix(base, prompts)
    for pair in found.pairs:
        a = {c.prompt_id: c.score for c in after.cells.values() if c.variant_id == pair.a}
        b = {c.prompt_id: c.score for c in before.cells.values() if c.variant_id == pair.b}
        expected = stats.compare_scores(a, b)
        assert (pair.delta, pair.low, pair.high, pair.n, pair.verdict) == pytest.approx(
            (expected.delta, expected.low, expected.high, expected.n, expected.verdict))


def test_without_a_base_the_page_shows_each_mean_with_its_interval_and_the_pairs(fake_provider, blueprint, client):
    run = _run(fake_provider, blueprint, b_bad=range(0, PROMPTS, 2))
    html = client.get(f"/runs/{run.pk}/compare").content.decode()
    models = {re.search(r"<code>(.*?)</code>", r).group(1): _text(r)
              for r in re.findall(r'<tr class="model">(.*?)</tr>', html, re.S)}
    interval = stats.mean_interval([0.0 if i % 2 == 0 else 1.0 for i in range(PROMPTS)])
    assert models[B] == f"{B} 0.50 {interval.low:.2f} to {interval.high:.2f} {PROMPTS}"
    pair = _text(re.search(r'<tr class="pair[^"]*">(.*?)</tr>', html, re.S).group(1))
    assert pair.startswith(f"{A} {B} +0.50") and pair.endswith("better")


def test_the_run_page_and_the_grid_show_each_mean_with_its_interval(fake_provider, blueprint, client):
    run = _run(fake_provider, blueprint, b_bad=range(0, PROMPTS, 2))
    interval = stats.mean_interval([0.0 if i % 2 == 0 else 1.0 for i in range(PROMPTS)])
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert f'hx-get="/runs/{run.pk}/compare?part=models" hx-trigger="load"' in page
    part = client.get(f"/runs/{run.pk}/compare?part=models", **htmx()).content.decode()
    assert part.lstrip().startswith('<div class="table-scroll" id="variants"') and "hx-get" not in part
    row = _text(re.search(rf"<code>{re.escape(B)}</code>(.*?)</tr>", part, re.S).group(1))
    assert row.startswith(f"0.50 {interval.low:.2f} – {interval.high:.2f}")
    grid = client.get(f"/runs/{run.pk}/results").content.decode()
    line = _text(re.search(rf"<code>{re.escape(B)}</code></th>(.*?)</tr>", grid, re.S).group(1))
    assert f"0.50 {interval.low:.2f} – {interval.high:.2f}" in line


def test_a_worse_verdict_is_a_regression_only_when_the_gate_says_so(fake_provider, blueprint, client):
    """4 of 12 prompts newly failed: "worse" at 95%, but not beyond the gate's family-wise 99.9% (Holm over the 2
    variants): the command's gate passes and the API's ``regression`` is false. Every prompt failing fails it."""
    from tests.cli.test_compare_command import compare

    base = _run(fake_provider, blueprint)
    later = _run(fake_provider, blueprint, a_bad=(2, 5, 8, 11))
    found = run_compare.decisions(later, base)
    assert {p.a: p.verdict for p in found.pairs} == {A: "worse", B: "cant_tell"}
    assert found.regressions == []
    data = found.to_dict()
    assert data["regression"] is False
    gate = data["gate"]["variants"][A]
    # 4 prompts down, none up: the sign test says 1/16, Holm over the 2 variants doubles it
    assert gate["fails"] is False and gate["p"] == 2 ** -4 and gate["pHolm"] == 2 ** -3
    assert data["gate"]["level"] == stats.GATE_LEVEL
    code, out, err = compare(later.pk, "--base", base.pk, "--fail-on-regression")
    assert code == 0 and "gate (" in out and out.rstrip().endswith("passes") and not err
    code, out, _ = compare(later.pk, "--base", base.pk, "--markdown")
    assert "No regression (1 variant worse at 95% but not beyond the gate's 99.9%)" in out

    worse = _run(fake_provider, blueprint, a_bad=range(PROMPTS))
    found = run_compare.decisions(worse, base)
    assert [p.a for p in found.regressions] == [A]
    answer = client.get(f"/api/runs/{worse.pk}/compare?base={base.pk}").json()
    assert answer["regression"] is True and answer["gate"]["variants"][A]["fails"] is True
    assert answer["gate"]["variants"][B]["fails"] is False
    code, _, err = compare(worse.pk, "--base", base.pk, "--fail-on-regression")
    assert code == 1 and A in err and "99.9%" in err
