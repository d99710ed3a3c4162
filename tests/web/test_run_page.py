"""The run page: live progress polled through htmx (stopped with 286 at the end), controls, and when done the
per-model scores, chart, judge agreement and the prompts x models heatmap; the heatmap's own pages; the runs list."""

import re

import pytest
from django.utils import timezone

from runs import start as run_start
from runs import work as run_work
from runs.models import Response, Run

from .conftest import htmx
from .run_support import (  # noqa: F401
    fake_llm,
    fake_llm_server,
    fake_provider,
    make_offline_run,
    make_run,
    offline_blueprint,
)

pytestmark = pytest.mark.django_db(transaction=True)


def started_but_not_finished(blueprint, *, done: int = 1) -> Run:
    """A run whose first ``done`` items were processed, the rest still pending, and a model waiting."""
    run = run_start.start_run(blueprint, enqueue=False)
    ids = list(Response.objects.filter(run=run).order_by("pk").values_list("pk", flat=True))
    run_work.execute_chunk(run.pk, ids[:done])
    Run.objects.filter(pk=run.pk).update(waiting={"fixtures:b": "429 from fixtures, attempt 2 of 3 in 12 s"})
    run.refresh_from_db()
    assert run.status == "running"
    return run


# --- while it runs -------------------------------------------------------------------------------


def test_a_running_run_shows_its_phase_counters_and_what_waits_and_polls(client):
    run = started_but_not_finished(offline_blueprint(4))
    page = client.get(f"/runs/{run.pk}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "Generating responses and judging each one" in html
    assert "1 of 8" in html
    assert "<code>fixtures:b</code>: 429 from fixtures, attempt 2 of 3 in 12 s" in html
    assert f'hx-get="/runs/{run.pk}/?poll=1" hx-trigger="every 2s"' in html
    assert 'formaction="/runs/%d/cancel"' % run.pk in html
    assert "Prompts × models" not in html  # results come when it ends


def test_the_polled_fragment_moves_with_the_counters_and_stops_when_the_run_ends(client):
    run = started_but_not_finished(offline_blueprint(4))
    fragment = client.get(f"/runs/{run.pk}/?poll=1", **htmx())
    assert fragment.status_code == 200
    body = fragment.content.decode()
    assert body.lstrip().startswith('<div id="progress"') and "<html" not in body
    assert "1 of 8" in body and "every 2s" in body

    run_work.run_inline(run)
    final = client.get(f"/runs/{run.pk}/?poll=1", **htmx())
    assert final.status_code == 286  # htmx stops polling
    body = final.content.decode()
    assert "8 of 8" in body and "every 2s" not in body
    assert "Prompts × models" in body  # the finished results replace the progress in place


def test_failures_so_far_are_listed_with_their_reason_and_link(fake_provider, client):
    run = make_run(fake_provider, models=("openai:cand-good", "openai:always-401"), judges=("openai:judge-a",))
    html = client.get(f"/runs/{run.pk}/").content.decode()
    failed = Response.objects.filter(run=run, status="failed").order_by("-finished_at").first()
    assert "3 failed" in html
    assert f'href="/runs/{run.pk}/responses/{failed.pk}/"' in html
    assert "401" in html
    assert f'formaction="/runs/{run.pk}/retry-failed"' in html


def test_a_queued_run_that_no_worker_took_says_what_to_check(client):
    run = run_start.start_run(offline_blueprint(2), enqueue=False)
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timezone.timedelta(minutes=5))
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "no worker has started it yet" in html and "qcluster" in html


def test_cancel_then_resume_from_the_page(client):
    run = started_but_not_finished(offline_blueprint(4))
    response = client.post(f"/runs/{run.pk}/cancel", follow=True)
    assert "Cancelled: no new item starts" in response.content.decode()
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert 'formaction="/runs/%d/resume"' % run.pk in response.content.decode()

    response = client.post(f"/runs/{run.pk}/resume", follow=True)
    run.refresh_from_db()
    assert run.status == "done" and run.items_done == 8  # tasks run inline in tests
    assert "Resumed:" in response.content.decode()


def test_control_accepts_only_known_actions_and_only_post(client):
    run = make_offline_run(2)
    assert client.post(f"/runs/{run.pk}/explode").status_code == 404
    assert client.get(f"/runs/{run.pk}/cancel").status_code == 405


# --- when done -------------------------------------------------------------------------------------


def test_a_finished_run_shows_scores_costs_latency_chart_and_agreement(fake_provider, client):
    run = make_run(fake_provider)
    page = client.get(f"/runs/{run.pk}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "every 2s" not in html
    # Models best first; weighted mean (capital has weight 2): (0.9 * 2 + 1 + 1) / 4 = 0.95
    good = html.index("<code>openai:cand-good[temp:0]</code>")
    bad = html.index("<code>openai:cand-bad[temp:0]</code>")
    assert good < bad
    rows = re.findall(r"<tr>\s*<th scope=\"row\"><code>(.*?)</code></th>(.*?)</tr>", html, re.S)
    cells = dict(rows)
    assert ">0.95<" in cells["openai:cand-good[temp:0]"]
    assert ">0.06<" in cells["openai:cand-bad[temp:0]"]  # (0 * 2 + 0.25 + 0) / 4
    assert "≠ 1" in cells["openai:cand-good[temp:0]"] and "✗ 2" in cells["openai:cand-bad[temp:0]"]
    assert "ms</td>" in cells["openai:cand-good[temp:0]"]  # latency
    assert re.search(r"6,\d{3} / \d+", cells["openai:cand-good[temp:0]"])  # judge tokens apart from candidates
    # The fake judges have no price: their cost is unknown, never "$0".
    assert run.aggregates["variants"]["openai:cand-good[temp:0]"]["judgeCostUnknown"] > 0
    assert "$0" not in cells["openai:cand-good[temp:0]"] and "unknown" in cells["openai:cand-good[temp:0]"]
    # The chart is inline SVG with a bar per variant, drawn by the server.
    svg = re.search(r'<svg class="score-chart".*?</svg>', html, re.S).group(0)
    assert svg.count('<rect class="bar') == 2 and "0.95 ± " in svg
    assert "<script" not in svg
    # Krippendorff's alpha and what it rests on: 16 judged points had both judges.
    agreement = run.aggregates["agreement"]
    assert agreement["points"] == 16
    assert f"{agreement['krippendorffsAlphaInterval']:.3f}" in html
    assert "over 16 points scored by two or more of 2 judges" in html
    assert page.headers["Content-Security-Policy"].startswith("default-src 'self'")


def test_the_heatmap_colours_cells_by_score_and_flags_should_not_and_disagreement(fake_provider, client):
    run = make_run(fake_provider)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    table = re.search(r'<table class="heatmap">.*?</table>', html, re.S).group(0)
    capital = re.search(r'<tr>\s*<th scope="row" class="prompt-col"><a href="[^"]+"><code>capital</code>.*?</tr>',
                        table, re.S).group(0)
    good, bad = re.findall(r'<td class="cell ([^"]+)">(.*?)</td>', capital, re.S)
    assert good[0] == "heat-9" and "0.90" in good[1] and "judges disagree" in good[1]
    assert bad[0] == "heat-0" and "0.00" in bad[1] and "meets a should-not point" in bad[1]
    response = Response.objects.get(run=run, prompt_id="capital", variant_id="openai:cand-good[temp:0]")
    assert f'href="/runs/{run.pk}/responses/{response.pk}/"' in good[1]
    assert '<span class="badge" title="prompt weight">×2</span>' in capital
    assert f'href="/runs/{run.pk}/prompts/0/"' in capital


def test_not_evaluated_and_failed_cells_say_so_and_are_never_coloured_as_scores(client):
    run = make_offline_run(5)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    last = re.search(r"<code>p004</code>.*?</tr>", html, re.S).group(0)
    cells = re.findall(r'<td class="cell ([^"]+)">(.*?)</td>', last, re.S)
    assert [c[0] for c in cells] == ["cell-not-evaluated", "cell-not-evaluated"]
    assert all("n/e" in c[1] and "(not evaluated)" in c[1] for c in cells)
    assert "`$factcheck` is not supported" in cells[0][1]  # the reason, as the cell's title
    stats = run.aggregates["variants"]["fixtures:a[temp:0]"]
    assert stats["notEvaluated"] == 1


def test_the_heatmap_pages_prompts_and_answers_htmx_with_the_fragment(client):
    run = make_offline_run(130)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert html.count('class="prompt-col"><a href=') == 100
    assert "Prompts 1–100 of 130" in html
    assert f'href="/runs/{run.pk}/heatmap?sort=order&amp;page=2"' in html
    assert f'hx-get="/runs/{run.pk}/heatmap?sort=order&amp;page=2"' in html

    second = client.get(f"/runs/{run.pk}/heatmap?sort=order&page=2", **htmx())
    body = second.content.decode()
    assert body.lstrip().startswith('<div id="heatmap"') and "<html" not in body
    assert body.count('class="prompt-col"><a href=') == 30
    assert "<code>p100</code>" in body and "<code>p000</code>" not in body

    whole = client.get(f"/runs/{run.pk}/heatmap?page=2")
    assert "<html" in whole.content.decode() and "Prompts 101–130 of 130" in whole.content.decode()


def test_the_heatmap_sorts_prompts_lowest_mean_first(client):
    run = make_offline_run(7)
    body = client.get(f"/runs/{run.pk}/heatmap?sort=lowest", **htmx()).content.decode()
    order = re.findall(r'class="prompt-col"><a href="[^"]+"><code>(p\d+)</code>', body)
    # b says yes to p000 and p003 only: those rows (mean 1.0) come after the 0.5 rows; p006 has no score.
    assert order == ["p001", "p002", "p004", "p005", "p000", "p003", "p006"]
    assert '<strong aria-current="true">Lowest mean first</strong>' in body


def test_an_unknown_run_is_404(client):
    assert client.get("/runs/999/").status_code == 404
    assert client.get("/runs/999/heatmap").status_code == 404


# --- the runs list --------------------------------------------------------------------------------


def test_the_runs_list_is_reachable_from_the_home_page_newest_first(client):
    first = make_offline_run(3, slug="one")
    second = make_offline_run(3, slug="two")
    home = client.get("/").content.decode()
    assert '<a href="/runs/"' in home
    html = client.get("/runs/").content.decode()
    assert html.index(f"Run {second.pk}</a>") < html.index(f"Run {first.pk}</a>")
    assert '<th scope="col">Blueprint</th>' in html
    assert '<span class="score-chip heat-7">0.75</span>' in html  # a: 1, b: 0.5 -> overall 0.75


def test_the_runs_list_narrows_to_one_blueprint(client):
    mine = make_offline_run(2, slug="mine")
    other = make_offline_run(2, slug="other")
    html = client.get("/runs/?blueprint=mine").content.decode()
    assert f"Run {mine.pk}</a>" in html and f"Run {other.pk}</a>" not in html
    assert "Runs of Many prompts" in html
    assert client.get("/runs/?blueprint=nope").status_code == 404


def test_the_runs_list_pages_with_htmx(client):
    blueprint = offline_blueprint(1, slug="paged")
    for _ in range(51):
        run_start.start_run(blueprint, enqueue=False)
    html = client.get("/runs/").content.decode()
    assert "Page 1 of 2" in html and 'href="?page=2"' in html and 'hx-get="?page=2"' in html
    fragment = client.get("/runs/?page=2", **htmx()).content.decode()
    assert fragment.lstrip().startswith('<section id="runs-results"') and fragment.count("<th scope=\"row\">") == 1
