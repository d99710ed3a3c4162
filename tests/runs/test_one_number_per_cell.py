"""One number per cell: a run with trials, for each rule (mean, best, pass_at_k), read through every door a
user has -- the run page's heatmap, the results grid and its live poll, compare, the offline report, the
CSV exports, the JSON export and the API -- shows the engine's cell score and nothing else.

The run is made through the production path (start -> worker tasks, inline -> records) against the fake
LLM server, where the candidate answers GOOD to one trial of three and BAD to the others.
"""

from __future__ import annotations

import csv
import io
import re
from html import unescape

import pytest

from blueprints.importing import import_files
from runs import start as run_start
from runs.engine.matrix import cell_outcome, ResponseRecord
from runs.engine.scoring import round2
from runs.models import Response, Run
from runs.spec import parsed_blueprint
from tests.fakes.pytest_fixtures import fake_llm, fake_llm_server, fake_provider  # noqa: F401
from tests.web.conftest import htmx

pytestmark = pytest.mark.django_db(transaction=True)

RULES = ("mean", "best", "pass_at_k")
TEXT = "title: Trials\nmodels: [openai:cand-once, openai:cand-always]\n---\n" + "".join(
    f"- id: {rule.replace('_', '-')}-q\n  prompt: Question for {rule}?\n  trials: 3\n  trial_aggregation: {rule}\n"
    f"  should:\n    - $contains: GOOD\n" for rule in RULES)
# What the engine's rule gives for one good trial of three: mean 1/3, the best trial 1, pass@k scores the mean.
EXPECTED = {"mean-q": 0.33, "best-q": 1.0, "pass-at-k-q": 0.33}
ONCE, ALWAYS = "openai:cand-once[temp:0]", "openai:cand-always[temp:0]"


@pytest.fixture
def run(fake_provider):
    rules = []
    for rule in RULES:
        rules.append({"model": "cand-once", "match": f"for {rule}", "reply": "GOOD answer", "times": 1})
        rules.append({"model": "cand-once", "match": f"for {rule}", "reply": "BAD answer"})
    rules.append({"model": "cand-always", "match": ".", "reply": "GOOD always"})
    fake_provider.script(rules)
    blueprint = import_files([("trials.yml", TEXT, {})], via="test").items[0].blueprint
    started = run_start.start_run(blueprint, fresh=True)
    started.refresh_from_db()
    assert started.status == "done", started.status
    return started


def _engine_cells(run: Run) -> dict[tuple[str, str], float | None]:
    """The engine's cell score from the stored trials: the reference every surface is held to."""
    prompts = parsed_blueprint(run.revision).prompts
    out: dict[tuple[str, str], list] = {}
    for r in Response.objects.filter(run=run):
        out.setdefault((r.prompt_index, r.variant_id), []).append(ResponseRecord(r.prompt_index, r.variant_id,
                                                                                 r.trial, r.score))
    return {(prompts[i].id, v): round2(cell_outcome(trials, prompts[i]).score) for (i, v), trials in out.items()}


def _numbers(fragment: str) -> list[float]:
    return [float(x) for x in re.findall(r"(?<![\w.])(\d\.\d\d)(?![\d])", unescape(re.sub(r"<[^>]+>", " ", fragment)))]


def _heatmap_row(html: str, prompt_id: str) -> str:
    row = re.search(r"<tr>\s*<th scope=\"row\"[^>]*>(?:(?!</tr>).)*?<code>" + re.escape(prompt_id)
                    + r"</code>(?:(?!</tr>).)*</tr>", html, re.S)
    assert row, f"no heatmap row for {prompt_id}"
    return row.group(0)


def test_every_surface_shows_the_engines_cell_score_for_mean_best_and_pass_at_k(client, run):
    engine = _engine_cells(run)
    # The trial scores are what the fake server was told to make them, and the rule makes the cell.
    assert {p: engine[(p, ONCE)] for p in EXPECTED} == EXPECTED
    assert all(engine[(p, ALWAYS)] == 1.0 for p in EXPECTED)
    bp = parsed_blueprint(run.revision)
    index = {p.id: i for i, p in enumerate(bp.prompts)}

    # Stored aggregates (the run list, the API's status, the exports' evalsite.aggregates).
    assert {p: run.aggregates["cells"][p][ONCE] for p in EXPECTED} == EXPECTED

    # The run page's heatmap: the cells of each prompt's row, models best first (always 1.00 before once).
    page = client.get(f"/runs/{run.pk}/").content.decode()
    page = page[page.index('id="heatmap"'):]
    for prompt_id, score in EXPECTED.items():
        row = _heatmap_row(page, prompt_id)
        cells = re.findall(r'<td class="cell [^"]*">(.*?)</td>', row, re.S)
        assert [_numbers(c)[0] for c in cells] == [1.0, score], (prompt_id, cells)
        assert f"{'pass@k' if prompt_id == 'pass-at-k-q' else prompt_id[:-2]} of 3 trials" in row

    # The heatmap sorted by lowest mean puts the two 0.33 rows before the best row.
    sorted_page = client.get(f"/runs/{run.pk}/heatmap?sort=lowest", **htmx()).content.decode()
    assert sorted_page.index("<code>best-q</code>") > sorted_page.index("<code>mean-q</code>")

    # The results grid, and the grid's per-model line (mean over prompts of the cell scores).
    grid = client.get(f"/runs/{run.pk}/results").content.decode()
    columns = re.findall(r'<th scope="col" class="variant-col"><code>([^<]+)</code>', grid)
    for prompt_id, score in EXPECTED.items():
        cell = re.search(rf'id="cell-{index[prompt_id]}-{columns.index(ONCE)}".*?class="gcell-score">([^<]+)<',
                         grid, re.S)
        assert float(cell.group(1)) == score, prompt_id
    mean_once = round2((1 / 3 + 1 + 1 / 3) / 3)  # the mean of the unrounded cell scores: 0.56
    model_line = re.search(rf"<code>{re.escape(ONCE)}</code></th>(.*?)</tr>", grid, re.S).group(1)
    assert f"{mean_once:.2f}" in model_line

    # The live poll sends the same cells (and the per-model line).
    poll = client.get(f"/runs/{run.pk}/results?since=0", **htmx()).content.decode()
    for prompt_id, score in EXPECTED.items():
        cell = re.search(rf'id="cell-{index[prompt_id]}-{columns.index(ONCE)}".*?class="gcell-score">([^<]+)<',
                         poll, re.S)
        assert cell and float(cell.group(1)) == score, prompt_id

    # Compare: this run against an identical base shows the cell score on both sides.
    changes = client.get(f"/runs/{run.pk}/compare?with={run.pk}").content.decode()
    assert "0.33" in changes and "1.00" in changes

    # The offline report's heatmap.
    report = b"".join(client.get(f"/runs/{run.pk}/report.html").streaming_content).decode()
    report = report[report.index('<table class="heatmap">'):]
    for prompt_id, score in EXPECTED.items():
        cells = re.findall(r'<td class="cell [^"]*">(.*?)</td>', _heatmap_row(report, prompt_id), re.S)
        assert [_numbers(c)[0] for c in cells] == [1.0, score], prompt_id

    # The JSON export and the API's results: avgCoverageExtent is the cell's score by its rule.
    for data in (client.get(f"/runs/{run.pk}/export.json").json(), client.get(f"/api/runs/{run.pk}/results").json()):
        coverage = data["evaluationResults"]["llmCoverageScores"]
        assert {p: coverage[p][ONCE]["avgCoverageExtent"] for p in EXPECTED} == EXPECTED
        ours = data["evalsite"]["responses"]
        assert {p: ours[p][ONCE]["cellScore"] for p in EXPECTED} == EXPECTED
        assert ours["best-q"][ONCE]["trials"][ours["best-q"][ONCE]["shownTrial"]]["score"] == 1.0
        # The upstream layout lists the points of the trial the cell stands for: under best, the good one.
        assert coverage["best-q"][ONCE]["pointAssessments"][0]["coverageExtent"] == 1.0
        assert data["evalsite"]["aggregates"]["cells"]["best-q"][ONCE] == 1.0
    status = client.get(f"/api/runs/{run.pk}").json()
    assert round2(status["models"][ONCE]["mean"]) == mean_once

    # The CSV exports: every row of a cell carries its cell score; the grid's view as CSV too.
    rows = list(csv.DictReader(io.StringIO(client.get(f"/runs/{run.pk}/export.csv").content.decode())))
    for row in rows:
        assert float(row["cell_score"]) == engine[(row["prompt_id"], row["model_id"])]
        assert row["prompt_text"].startswith("user: Question for") and row["response_text"]
    grid_rows = list(csv.DictReader(io.StringIO(client.get(f"/runs/{run.pk}/results.csv").content.decode())))
    assert {(r["prompt_id"], r["model_id"]): float(r["cell_score"]) for r in grid_rows} == engine


def test_the_grids_csv_download_keeps_the_views_filter(client, run):
    below = list(csv.DictReader(io.StringIO(
        client.get(f"/runs/{run.pk}/results.csv?filter=failures&threshold=0.5").content.decode())))
    assert {(r["prompt_id"], r["model_id"]) for r in below} == {("mean-q", ONCE), ("pass-at-k-q", ONCE)}
    assert all(r["aggregation"] in ("mean", "pass@k") and r["trials"] == "3" for r in below)



def test_a_kept_matrix_is_never_out_of_date(client, run):
    """A finished run's matrix is kept in the process between requests; an override, an annotation and a
    re-run each move what it is keyed by, so the next page shows the change."""
    from runs.annotations import save_annotation
    from runs.models import PointAssessment
    from runs.overrides import apply_override
    from runs.records import run_matrix

    prompts = parsed_blueprint(run.revision).prompts
    first = run_matrix(run, prompts)
    run.refresh_from_db()
    assert run_matrix(run, prompts) is first  # kept: nothing changed
    bad = PointAssessment.objects.filter(response__run=run, response__prompt_id="mean-q", score=0.0,
                                         response__variant_id=ONCE).first()
    apply_override(bad, 1.0, reason="It is good enough.")
    grid = client.get(f"/runs/{run.pk}/results").content.decode()
    columns = re.findall(r'<th scope="col" class="variant-col"><code>([^<]+)</code>', grid)
    cell = re.search(rf'id="cell-0-{columns.index(ONCE)}".*?class="gcell-score">([^<]+)<', grid, re.S)
    assert float(cell.group(1)) == 0.67  # two good trials of three now
    save_annotation(bad.response, thumbs="down", comment="No.")
    grid = client.get(f"/runs/{run.pk}/results?filter=thumbs-down").content.decode()
    assert "1 response in 1 prompt match" in grid


def test_every_csv_we_write_escapes_what_a_spreadsheet_would_run(client, fake_provider):
    """OWASP's advice against CSV injection: a text cell that starts with = + - @, a tab or a carriage return
    gets a leading quote, in the run's CSV and the grid's; a judge's or a model's words are hostile."""
    from runs.exports import safe_cell

    assert [safe_cell(v) for v in ("=HYPERLINK(\"http://x\")", "+1", "-cmd", "@SUM(A1)", "\tx", "\rx", "ok")] == [
        "'=HYPERLINK(\"http://x\")", "'+1", "'-cmd", "'@SUM(A1)", "'\tx", "'\rx", "ok"]
    assert (safe_cell(-0.5), safe_cell(None), safe_cell(True)) == ("-0.5", "", "1")  # our own numbers stay numbers
    fake_provider.script([{"model": "cand-evil", "match": ".", "reply": "=HYPERLINK(\"http://evil.example\",\"x\")"}])
    text = ("title: Evil\nmodels: [openai:cand-evil]\n---\n- id: =cmd\n  prompt: '@hi'\n  should:\n"
            "    - $contains: nothing\n")
    blueprint = import_files([("evil.yml", text, {})], via="test").items[0].blueprint
    evil = run_start.start_run(blueprint, fresh=True)
    for url in (f"/runs/{evil.pk}/export.csv", f"/runs/{evil.pk}/results.csv"):
        rows = list(csv.DictReader(io.StringIO(client.get(url).content.decode())))
        assert rows, url
        for row in rows:
            assert row["prompt_id"] == "'=cmd" and row["response_text"].startswith("'=HYPERLINK")
            assert row["prompt_text"] == "user: @hi"  # starts with 'user:', nothing to escape
