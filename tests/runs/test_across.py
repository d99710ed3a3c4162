"""Across runs: a blueprint's history with a pinned baseline, a model's page, leaderboards by tag, drift, and
their API -- over runs made through the production path (start -> worker tasks, inline -> records) against the
fake LLM server. Every figure is held to a matrix cell or to the compare page's own decisions."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from blueprints.importing import import_files
from blueprints.models import Blueprint
from runs.across import figures as across
from runs import compare as run_compare
from runs import start as run_start
from runs.engine import across as engine
from runs.models import Run, RunSummary
from runs.records import bump_results, run_matrix
from runs.spec import parsed_blueprint
from tests.fakes.pytest_fixtures import fake_llm, fake_llm_server, fake_provider  # noqa: F401
from tests.web.conftest import htmx

PROMPTS = 8
A, B = "openai:cand-a", "openai:cand-b"


def text(tags=("maths",), models=(A, B), changed: int | None = None) -> str:
    head = f"title: Across\ntags: [{', '.join(tags)}]\nmodels: [{', '.join(models)}]\n---\n"
    return head + "".join(
        f"- id: q{n}\n  prompt: Question {n}{' (reworded)' if n == changed else ''}?\n  should:\n    - $contains: GOOD\n"
        for n in range(PROMPTS))


def script(fake, *, b_good: int):
    """cand-a answers GOOD to every prompt; cand-b to the first ``b_good`` only."""
    rules = [{"model": "cand-a", "match": ".", "reply": "GOOD answer"}]
    rules += [{"model": "cand-b", "match": rf"Question {n}\b", "reply": "GOOD too"} for n in range(b_good)]
    rules.append({"model": "cand-b", "match": ".", "reply": "BAD answer"})
    fake.script(rules)


def make_run(fake, blueprint, *, b_good: int, revision=None) -> Run:
    script(fake, b_good=b_good)
    run = run_start.start_run(blueprint, revision=revision, fresh=True)
    run.refresh_from_db()
    assert run.status == "done", run.status
    return run


def imported(slug_text: str, name: str = "across.yml") -> Blueprint:
    return import_files([(name, slug_text, {})], via="test").items[0].blueprint


def variant(model: str) -> str:
    return f"{model}[temp:0]"


# --- pure: tables ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant_id, expected", [
    ("openai:gpt-4o[temp:0]", ("openai:gpt-4o", 0.0, None)),
    ("openrouter:meta/llama-3:free[temp:0.7][sp_idx:1]", ("openrouter:meta/llama-3:free", 0.7, 1)),
    ("custom-model", ("custom-model", None, None)),
])
def test_a_variant_id_gives_its_model_as_written_its_temperature_and_system(variant_id, expected):
    assert engine.parse_variant(variant_id) == expected


@pytest.mark.parametrize("blueprints, minimum", [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3)])
def test_a_model_is_ranked_when_it_ran_at_least_half_the_tags_blueprints(blueprints, minimum):
    assert engine.minimum_covered(blueprints) == minimum


def _summary(model_cells: dict[str, list[float]]) -> dict:
    n = len(next(iter(model_cells.values())))
    return {"prompts": [f"p{i}" for i in range(n)], "weights": [None] * n, "order": list(model_cells),
            "variants": {f"{m}[temp:0]": {"model": m, "temperature": 0.0, "mean": sum(c) / n, "low": None,
                                           "high": None, "n": n, "cells": c, "responses": [None] * n}
                         for m, c in model_cells.items()}}


def test_a_leaderboard_ranks_models_that_ran_enough_blueprints_and_shows_the_others_apart():
    one = _summary({"x": [1.0, 0.5], "y": [0.5, 0.5]})
    one["order"] = ["x[temp:0]", "y[temp:0]"]
    two = _summary({"x": [1.0, 1.0]})
    two["order"] = ["x[temp:0]"]
    three = _summary({"x": [0.0, 1.0]})
    three["order"] = ["x[temp:0]"]
    board = engine.leaderboard({"b1": one, "b2": two, "b3": three}, 4)
    assert [(r.model, r.rank, r.covered) for r in board.ranked] == [("x", 1, 3)]
    assert board.ranked[0].mean == pytest.approx((0.75 + 1.0 + 0.5) / 3)
    assert [(r.model, r.rank, r.covered) for r in board.apart] == [("y", None, 1)]


# --- through the real worker path ------------------------------------------------------------------------------------

pytestmark_db = pytest.mark.django_db(transaction=True)


@pytestmark_db
def test_the_history_shows_every_run_and_the_baselines_verdicts_are_the_compare_pages(client, fake_provider):
    blueprint = imported(text())
    first = make_run(fake_provider, blueprint, b_good=PROMPTS)
    second = make_run(fake_provider, blueprint, b_good=2)

    page = client.get(f"/runs/history/{blueprint.slug}")
    assert page.status_code == 200
    html = page.content.decode()
    assert f'id="run-{first.pk}"' in html and f'id="run-{second.pk}"' in html
    assert "No baseline is pinned" in html

    assert client.post(f"/runs/history/{blueprint.slug}", {"run": first.pk}).status_code == 302
    found = across.history(blueprint)
    assert found.baseline.pk == first.pk
    decided = run_compare.decisions(second, first)
    ours = found.compared[second.pk]["pairs"]
    for pair in decided.pairs:  # the same verdicts, differences and intervals as the compare page
        mine = ours[pair.a]
        assert (mine.verdict, mine.delta, mine.low, mine.high, mine.n) == (
            pair.verdict, pair.delta, pair.low, pair.high, pair.n)
    assert found.compared[second.pk]["worse"] == [variant(B)]

    # Each run's mean and interval are the run page's (decisions without a base: stats.mean_intervals).
    for run in (first, second):
        models = run_compare.decisions(run).models
        info = next(i for i in found.runs if i.pk == run.pk)
        for v, interval in models.items():
            got = info.summary["variants"][v]
            assert (got["mean"], got["low"], got["high"], got["n"]) == (
                interval.mean, interval.low, interval.high, interval.n)

    # The run page loads "compared with the baseline" in place; it names the variant that is worse.
    detail = client.get(f"/runs/{second.pk}/").content.decode()
    assert f'hx-get="/runs/{second.pk}/baseline"' in detail and f"/runs/history/{blueprint.slug}" in detail
    part = client.get(f"/runs/{second.pk}/baseline", **htmx()).content.decode()
    assert "Compared with the baseline" in part and "worse" in part and variant(B) in part
    assert "baseline of its blueprint" in client.get(f"/runs/{first.pk}/baseline", **htmx()).content.decode()
    assert client.get(f"/runs/{second.pk}/baseline").status_code == 302  # without htmx: the history page


@pytestmark_db
def test_a_summary_is_rebuilt_when_the_runs_results_change_and_never_shown_stale(client, fake_provider):
    blueprint = imported(text())
    run = make_run(fake_provider, blueprint, b_good=4)
    across.history(blueprint)
    stored = RunSummary.objects.get(run=run)
    assert stored.results_version == run.results_version
    # A reviewer's change moves the version (records.bump_results, as an override does): the next read rebuilds.
    cell = run_matrix(run, parsed_blueprint(run.revision).prompts).cell(PROMPTS - 1, variant(B))
    run.responses.filter(pk=cell.response_id).update(score=1.0)
    bump_results(run.pk)
    run.refresh_from_db()
    info = next(i for i in across.history(blueprint).runs if i.pk == run.pk)
    expected = run_compare.decisions(run).models[variant(B)]
    assert info.summary["variants"][variant(B)]["mean"] == expected.mean == pytest.approx(5 / PROMPTS)
    assert RunSummary.objects.get(run=run).results_version == run.results_version


@pytestmark_db
def test_the_history_names_the_prompts_a_new_revision_changed_and_leaves_them_out(client, fake_provider):
    blueprint = imported(text())
    first = make_run(fake_provider, blueprint, b_good=PROMPTS)
    revision, _ = blueprint.save_revision(text(changed=0))
    blueprint.refresh_from_db()
    second = make_run(fake_provider, blueprint, b_good=PROMPTS, revision=revision)
    across.pin_baseline(blueprint, first)
    found = across.history(blueprint)
    assert [r["changed"] for r in found.revisions] == [[], ["q0"]]
    assert found.compared[second.pk]["changed"] == ["q0"]
    assert found.compared[second.pk]["pairs"][variant(A)].n == PROMPTS - 1
    assert "1 prompt changed (<code>q0</code>)" in client.get(f"/runs/history/{blueprint.slug}").content.decode()


@pytestmark_db
def test_a_model_page_lists_its_runs_with_ranks_and_its_weakest_prompts_link_to_the_response(client,
                                                                                             fake_provider):
    blueprint = imported(text())
    run = make_run(fake_provider, blueprint, b_good=3)
    matrix = run_matrix(run, parsed_blueprint(run.revision).prompts)
    page = client.get(f"/runs/models/{B}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "2 of 2" in html  # cand-b is second of the run's two models
    found = across.model_page(B)
    assert [(r.info.pk, r.rank, r.of) for r in found.runs] == [(run.pk, 2, 2)]
    assert found.runs[0].variant["mean"] == pytest.approx(matrix.summaries[variant(B)].mean)
    assert len(found.weak) == 5 and not found.strong
    for gap in found.weak:  # each a matrix cell, against the other model's cell on the same prompt
        cell, peer = matrix.cell(gap.prompt_index, variant(B)), matrix.cell(gap.prompt_index, variant(A))
        assert (gap.score, gap.peers, gap.response_id) == (cell.score, peer.score, cell.response_id)
        assert f'href="/runs/{run.pk}/responses/{cell.response_id}/"' in html
    assert across.model_page(A).runs[0].rank == 1
    assert client.get("/runs/models/openai:nobody/").status_code == 404
    listing = client.get("/runs/models/").content.decode()
    assert f'href="/runs/models/{A}/"' in listing and f'href="/runs/models/{B}/"' in listing

    api = json.loads(client.get(f"/api/models/{B}").content)
    assert api["runs"][0]["rank"] == 2 and api["runs"][0]["mean"] == pytest.approx(matrix.summaries[variant(B)].mean)
    assert api["weakest"][0]["response"] == found.weak[0].response_id


@pytestmark_db
def test_a_tag_leaderboard_ranks_over_the_latest_run_of_each_blueprint_and_sets_the_few_apart(client,
                                                                                           fake_provider):
    one = imported(text(tags=("maths",)), "one.yml")
    two = imported(text(tags=("maths", "other")), "two.yml")
    three = imported(text(tags=("maths",), models=(A, "openai:cand-c")), "three.yml")
    make_run(fake_provider, one, b_good=0)  # an older run of one: the latest is read
    make_run(fake_provider, one, b_good=PROMPTS)
    make_run(fake_provider, two, b_good=4)
    fake_provider.script([{"model": "cand-a", "match": ".", "reply": "GOOD"},
                          {"model": "cand-c", "match": ".", "reply": "BAD"}])
    run_start.start_run(three, fresh=True)
    board = across.tag_board("maths")
    assert board.board.minimum == 2
    assert [(r.model, r.rank, r.covered) for r in board.board.ranked] == [(A, 1, 3), (B, 2, 2)]
    assert board.board.ranked[1].mean == pytest.approx((1.0 + 0.5) / 2)
    assert [(r.model, r.covered) for r in board.board.apart] == [("openai:cand-c", 1)]
    html = client.get("/runs/leaderboards/maths/").content.decode()
    assert "Ran too few to be ranked" in html and "openai:cand-c" in html
    api = json.loads(client.get("/api/leaderboards/maths").content)
    assert [r["model"] for r in api["ranked"]] == [A, B] and api["apart"][0]["blueprints"] == 1
    assert client.get("/runs/leaderboards/nothing/").status_code == 404
    overview = client.get("/overview/").content.decode()
    assert 'href="/runs/leaderboards/maths/"' in overview and "Leaderboards by tag" in overview


@pytestmark_db
def test_drift_at_temperature_zero_a_day_apart_is_flagged_on_the_overview_and_the_model_page(client,
                                                                                              fake_provider):
    blueprint = imported(text())
    before = make_run(fake_provider, blueprint, b_good=PROMPTS)
    two_days = before.finished_at - timedelta(days=2)
    Run.objects.filter(pk=before.pk).update(created_at=two_days, finished_at=two_days)
    after = make_run(fake_provider, blueprint, b_good=0)
    drifted = across.drift_of(across.finished_infos())
    assert [(d.variant_id, d.run_id, d.base_id, d.comparison.verdict) for d in drifted] == [
        (variant(B), after.pk, before.pk, "worse")]
    assert drifted[0].comparison.delta == pytest.approx(-1.0)
    overview = client.get("/overview/").content.decode()
    assert "No drift found" not in overview and f"run {after.pk}</a> against" in overview
    model = client.get(f"/runs/models/{B}/").content.decode()
    assert 'id="drift"' in model
    assert 'id="drift"' not in client.get(f"/runs/models/{A}/").content.decode()


@pytestmark_db
def test_runs_less_than_a_day_apart_are_not_drift(fake_provider):
    blueprint = imported(text())
    make_run(fake_provider, blueprint, b_good=PROMPTS)
    make_run(fake_provider, blueprint, b_good=0)
    assert across.drift_of(across.finished_infos()) == []


@pytestmark_db
def test_the_overview_lists_what_finished_since_the_last_visit_with_what_got_worse(client, fake_provider):
    blueprint = imported(text())
    first = make_run(fake_provider, blueprint, b_good=PROMPTS)
    across.pin_baseline(blueprint, first)
    html = client.get("/overview/").content.decode()  # sets the last visit
    assert f'href="/runs/{first.pk}/"' in html
    assert "Nothing new" in client.get("/overview/").content.decode()
    second = make_run(fake_provider, blueprint, b_good=1)
    html = client.get("/overview/").content.decode()
    assert f'href="/runs/{second.pk}/"' in html and "worse than the baseline" in html
    assert 'href="/overview/"' in client.get("/runs/").content.decode()


@pytestmark_db
def test_the_history_api_gives_each_run_its_figures_and_its_comparison_with_the_baseline(client, fake_provider):
    blueprint = imported(text())
    first = make_run(fake_provider, blueprint, b_good=PROMPTS)
    second = make_run(fake_provider, blueprint, b_good=2)
    across.pin_baseline(blueprint, first)
    data = json.loads(client.get(f"/api/runs-history/{blueprint.slug}").content)
    assert data["baseline"] == first.pk and [r["run"] for r in data["runs"]] == [first.pk, second.pk]
    assert data["runs"][1]["baseline"]["worse"] == [variant(B)]
    assert data["runs"][1]["variants"][variant(B)]["mean"] == pytest.approx(2 / PROMPTS)
    assert client.get("/api/runs-history/nope").status_code == 404


@pytestmark_db
def test_the_history_and_model_pages_read_a_bounded_number_of_queries(client, fake_provider):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    blueprint = imported(text())
    counts = []
    for b_good in (8, 4, 2):
        make_run(fake_provider, blueprint, b_good=b_good)
        client.get(f"/runs/history/{blueprint.slug}")  # builds the new run's summary
        client.get(f"/runs/models/{B}/")
        with CaptureQueriesContext(connection) as history:
            client.get(f"/runs/history/{blueprint.slug}")
        with CaptureQueriesContext(connection) as model:
            client.get(f"/runs/models/{B}/")
        counts.append((len(history), len(model)))
    assert counts[0] == counts[1] == counts[2], counts


@pytest.mark.django_db(transaction=True)
def test_the_home_page_loads_the_overview_in_place_without_marking_the_visit_seen(client):
    page = client.get("/").content.decode()
    assert 'hx-get="/overview/?part=home"' in page
    part = client.get("/overview/?part=home", HTTP_HX_REQUEST="true")
    assert part.status_code == 200 and "Leaderboards by tag" in part.content.decode()
    assert "<html" not in part.content.decode() and "evalsite_overview_seen" not in part.cookies
    full = client.get("/overview/")
    assert "evalsite_overview_seen" in full.cookies


@pytest.mark.django_db(transaction=True)
def test_a_run_that_finishes_stores_its_summary_so_no_page_builds_it(fake_provider):
    run = make_run(fake_provider, imported(text()), b_good=3)
    row = RunSummary.objects.get(run=run)
    assert (row.results_version, row.status) == (run.results_version, run.status) == (run.results_version, "done")


# --- coverage and deal-breaker bounds on the model page and leaderboards (issue 35) --------------------------------


def guarded_text(tags=("maths",)) -> str:
    head = f"title: Guarded\ntags: [{', '.join(tags)}]\nmodels: [{A}, {B}]\n---\n"
    return head + "".join(f"- id: q{n}\n  prompt: Question {n}?\n  should:\n    - $contains: GOOD\n"
                          f"  should_not:\n    - $contains: BAD\n" for n in range(4))


def test_coverage_is_pooled_per_model_and_every_missing_cell_is_named():
    def summary(states_a, states_b, calls=4):
        out = {"prompts": ["p0", "p1", "p2"], "weights": [None] * 3, "order": ["a[temp:0]", "b[temp:0]"],
               "variants": {}}
        for name, states in (("a", states_a), ("b", states_b)):
            out["variants"][f"{name}[temp:0]"] = {
                "model": name, "cells": [1.0 if s == "scored" else None for s in states], "states": states,
                "trials": sum(1 for s in states if s), "calls": calls, "costUsd": 0.5, "costCalls": 2,
                "latencyMs": 100.0, "latencyCalls": 4, "outputTokens": 10.0, "tokenAnswers": 2,
                "shouldNot": {"failures": 1, "answers": 2}}
        return out

    one = summary(["scored", "scored", "not-evaluated"], ["scored", None, "failed"])
    two = summary(["scored", "scored", "scored"], ["scored", "scored", None])
    b = engine.coverage([("one", one), ("two", two)], "b")
    assert (b.blueprints, b.prompts, b.offered, b.trials, b.not_evaluated) == (2, 4, 6, 4, 1)
    assert b.missing == [("one", "p1"), ("two", "p2")]
    assert b.not_evaluated_rate == pytest.approx(0.25)
    assert (b.cost_usd, b.latency_ms, b.output_tokens) == (0.5, 100.0, 10.0)
    from runs.engine.bounds import upper_bound
    assert (b.bound.failures, b.bound.n, b.bound.upper) == (2, 4, upper_bound(2, 4))
    a = engine.coverage([("one", one)], "a")
    assert (a.prompts, a.offered, a.not_evaluated, a.missing) == (3, 3, 1, [])
    assert engine.coverage([("one", one)], "nobody").blueprints == 0
    together = engine.coverages([("one", one), ("two", two)])
    assert together["b"] == b and set(together) == {"a", "b"}


@pytestmark_db
def test_the_model_page_and_leaderboard_show_what_each_model_was_run_on_and_name_missing_cells(client,
                                                                                             fake_provider):
    """cand-b's generation fails on q1 (not evaluated, neither pass nor fail), says BAD on q2 (a deal-breaker), and
    its q3 cell is gone (missing): the pages say so beside its mean. main showed the mean alone."""
    blueprint = imported(guarded_text(), "guarded.yml")
    fake_provider.script([{"model": "cand-a", "match": ".", "reply": "GOOD answer"},
                          {"model": "cand-b", "match": r"Question 1\b", "reply": "no", "status": 400},
                          {"model": "cand-b", "match": r"Question 2\b", "reply": "BAD answer"},
                          {"model": "cand-b", "match": ".", "reply": "GOOD too"}])
    run = run_start.start_run(blueprint, fresh=True)
    run.refresh_from_db()
    assert run.is_finished and run.status == "done", run.status
    from runs.models import Response
    Response.objects.filter(run=run, variant_id=variant(B), prompt_index=3).delete()
    bump_results(run.pk)

    html = client.get(f"/runs/models/{B}/").content.decode()
    section = html.split('id="coverage"', 1)[1].split("</section>", 1)[0]
    assert "3 of 4" in section  # prompts run, of those a model was run on
    assert "33% (1)" in section  # q1: no score
    assert "1 not run: <code>q3</code>" in section
    assert "1 failure in 2 answers" in section  # q0 and q2 scored; q2 met the should-not point
    api = json.loads(client.get(f"/api/models/{B}").content)["coverage"]
    assert api["total"]["missing"] == [{"blueprint": "guarded", "prompt": "q3"}]
    assert api["total"]["shouldNot"]["failures"] == 1 and api["total"]["shouldNot"]["answers"] == 2
    a_section = client.get(f"/runs/models/{A}/").content.decode().split('id="coverage"', 1)[1].split("</section>")[0]
    assert "4 of 4" in a_section and "0 failures in 4 answers" in a_section

    board = client.get("/runs/leaderboards/maths/").content.decode()
    row = board.split(f'href="/runs/models/{B}/"', 1)[1].split("</tr>", 1)[0]
    assert "3 of 4" in row and "<code>guarded</code> <code>q3</code>" in row and "33%" in row
    assert "Missing cells" in client.get("/overview/").content.decode()  # the boards on the overview too
    listing = client.get("/runs/models/").content.decode()
    b_row = listing.split(f'href="/runs/models/{B}/"', 1)[1].split("</tr>", 1)[0]
    assert "3 of 4" in b_row and "33%" in b_row and f'href="/runs/models/{B}/#coverage">1</a>' in b_row
    api = json.loads(client.get("/api/leaderboards/maths").content)
    assert api["ranked"][1]["coverage"]["missing"] == [{"blueprint": "guarded", "prompt": "q3"}]
