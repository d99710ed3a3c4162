"""Downloads: the run as JSON and CSV (runs/exports.py), and one self-contained HTML report that opens offline."""

import csv
import io
import json
import re
from html.parser import HTMLParser

import pytest

from runs.models import PointAssessment, Response

from .run_support import fake_llm, fake_llm_server, fake_provider, make_offline_run, make_run  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def report_of(client, run):
    response = client.get(f"/runs/{run.pk}/report.html")
    assert response.status_code == 200 and response.streaming
    return response, b"".join(response.streaming_content).decode()


class Addresses(HTMLParser):
    """Every address a document names in an attribute."""

    def __init__(self, html):
        super().__init__()
        self.addresses, self.tags = [], set()
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.addresses += [value for name, value in attrs if name in ("href", "src", "action", "data", "srcset",
                                                                       "poster", "xmlns")]


def test_the_run_page_links_the_three_downloads(fake_provider, client):
    run = make_run(fake_provider)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    for url in (f"/runs/{run.pk}/report.html", f"/runs/{run.pk}/export.json", f"/runs/{run.pk}/export.csv"):
        assert f'href="{url}" download' in html


def test_json_download_is_the_export_with_overrides_applied(fake_provider, client):
    run = make_run(fake_provider)
    response = Response.objects.get(run=run, prompt_id="capital", variant_id="openai:cand-good[temp:0]")
    seine = PointAssessment.objects.get(response=response, text="Mentions the Seine river.")
    client.post(f"/runs/{run.pk}/responses/{response.pk}/points/{seine.position}/override",
                {"score": "1", "reason": "named"})
    download = client.get(f"/runs/{run.pk}/export.json")
    assert download["Content-Disposition"] == f'attachment; filename="results-fixture-run-{run.pk}.json"'
    data = json.loads(download.content)
    entry = data["evaluationResults"]["llmCoverageScores"]["capital"]["openai:cand-good[temp:0]"]
    assert entry["avgCoverageExtent"] == 1.0
    assert data["evalsite"]["runId"] == run.pk


def test_csv_download_has_a_row_per_point(fake_provider, client):
    run = make_run(fake_provider)
    download = client.get(f"/runs/{run.pk}/export.csv")
    assert download["Content-Type"] == "text/csv; charset=utf-8"
    assert download["Content-Disposition"].endswith(f'run-{run.pk}.csv"')
    rows = list(csv.DictReader(io.StringIO(download.content.decode())))
    assert len(rows) == PointAssessment.objects.filter(response__run=run).count() == 2 * (5 + 5 + 1)


def test_the_html_report_is_one_file_with_no_script_and_no_outside_address(fake_provider, client):
    run = make_run(fake_provider)
    response, html = report_of(client, run)
    assert response["Content-Disposition"] == f'attachment; filename="results-fixture-run-{run.pk}-report.html"'
    found = Addresses(html)
    assert "script" not in found.tags and "link" not in found.tags and "img" not in found.tags
    assert all(a.startswith("#") for a in found.addresses), [a for a in found.addresses if not a.startswith("#")]
    assert not re.search(r"url\(|@import|https?://", html.split("</style>", 1)[0])  # the inline CSS fetches nothing
    assert html.count("<style>") == 1 and html.rstrip().endswith("</html>")
    # Every in-document link has its target.
    ids = set(re.findall(r'id="([^"]+)"', html))
    assert {a[1:] for a in found.addresses} <= ids


def test_the_html_report_has_scores_heatmap_responses_points_and_reflections(fake_provider, client):
    run = make_run(fake_provider)
    _, html = report_of(client, run)
    assert "Results fixture — run" in html
    assert '<svg class="score-chart"' in html and "0.95 ± " in html
    assert "Krippendorff's alpha (interval)" in html
    heatmap = re.search(r'<table class="heatmap">.*?</table>', html, re.S).group(0)
    assert heatmap.count("<tr>") == 1 + 3 and "0.90" in heatmap and "✗" in heatmap and "≠" in heatmap
    for response in Response.objects.filter(run=run):
        assert f'id="r-{response.pk}"' in html
    assert "<strong>Paris</strong> is the capital of France, on the Seine." in html  # markdown, rendered
    assert "The river is named only in passing." in html  # a judge's reflection
    assert "<code>$icontains(&quot;paris&quot;)</code>" in html  # a function point with its arguments
    assert "Not evaluated: `$factcheck` is not supported" in html
    # An html response is rendered as on the site: sanitised, in a sandboxed frame.
    frames = re.findall(r'<iframe class="html-frame" sandbox="" srcdoc="([^"]*)"', html)
    assert len(frames) == 2 and any("&lt;h1&gt;Hello&lt;/h1&gt;&lt;p&gt;A small page.&lt;/p&gt;" in f for f in frames)


def test_the_report_renders_descriptions_and_reviewers_words(fake_provider, client):
    from blueprints.models import Blueprint
    from runs import annotations, overrides

    from .run_support import BLUEPRINT, make_blueprint

    text = BLUEPRINT.replace("description: Exercises every part of the result pages.",
                             "description: Exercises **every** part, see [the guide](https://example.org/x).")
    text = text.replace("  ideal: \"**Paris** is the capital of France.\"",
                        "  description: A *capital* question.\n  ideal: \"**Paris** is the capital of France.\"")
    blueprint = make_blueprint(text, slug="described")
    run = make_run(fake_provider, blueprint=blueprint)
    response = Response.objects.get(run=run, prompt_id="capital", model_id__endswith="cand-bad")
    annotations.save_annotation(response, thumbs="down", comment="Lyon <again>.", who="Ana")

    _, html = report_of(client, run)

    assert "Exercises <strong>every</strong> part, see the guide." in html  # markdown; the link keeps its text
    assert "example.org" not in html
    assert "A <em>capital</em> question." in html
    assert "Reviewer Ana: 👎 thumbs down “Lyon &lt;again&gt;.”" in html
    assert Blueprint.objects.filter(slug="described").exists()


def test_a_large_report_streams_in_chunks(client):
    run = make_offline_run(120)
    response = client.get(f"/runs/{run.pk}/report.html")
    chunks = [c for c in response.streaming_content if c]
    assert len(chunks) > 5
    html = b"".join(chunks).decode()
    assert html.count('<section id="prompt-') == 120
