"""Figures you can sign: the page behind a cell shows the cell first, and "passed" means one thing everywhere.

Runs with trials are made through the production path (start -> worker tasks, inline -> records) against the
fake LLM server. With ``threshold: 0.8`` and ``trial_aggregation: pass_at_k`` a cell passes when
1 - (1 - p)^k reaches ``trial_threshold`` (0.8), p the share of its trials that passed (AI Eval's formula);
without a threshold no cell has a verdict, so every page says "no threshold set" instead of a pass rate.
"""

from __future__ import annotations

import csv
import io
import json
import re
from html import unescape
from io import StringIO

import pytest
from django.core.management import call_command

from blueprints.importing import import_files
from runs import start as run_start
from runs.models import Response
from tests.fakes.pytest_fixtures import fake_llm, fake_llm_server, fake_provider  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

A, B = "openai:cand-a[temp:0]", "openai:cand-b[temp:0]"
THRESHOLD = """title: Signed
threshold: 0.8
trials: 3
trial_aggregation: pass_at_k
models: [openai:cand-a, openai:cand-b]
---
- id: three-good
  prompt: Question three?
  should: [$contains: GOOD]
- id: two-good
  prompt: Question two?
  should: [$contains: GOOD]
- id: one-good
  prompt: Question one?
  should: [$contains: GOOD]
"""
# Good trials of three per cell, as the fake server is told to answer.
GOOD_TRIALS = {("three-good", A): 3, ("two-good", A): 2, ("one-good", A): 1,
               ("three-good", B): 0, ("two-good", B): 1, ("one-good", B): 3}
NO_THRESHOLD = """title: Unsigned
trials: 3
models: [openai:cand-a, openai:cand-b]
---
- id: always
  prompt: Question always?
  should: [$contains: GOOD]
"""


def pass_at_k(good: int, k: int = 3) -> float:
    """The published formula (AI Eval): 1 - (1 - p)^k, p = passed trials / k."""
    return 1 - (1 - good / k) ** k


def _script(fake_provider):
    rules = []
    for (prompt_id, variant), good in GOOD_TRIALS.items():
        model, word = variant.split(":")[1].split("[")[0], prompt_id.split("-")[0]
        if good:
            rules.append({"model": f"^{model}$", "match": f"Question {word}", "reply": "GOOD answer", "times": good})
        rules.append({"model": f"^{model}$", "match": f"Question {word}", "reply": "BAD answer"})
    rules.append({"model": ".", "match": "always", "reply": "GOOD always"})
    fake_provider.script(rules)


def _start(text: str, name: str):
    blueprint = import_files([(name, text, {})], via="test").items[0].blueprint
    run = run_start.start_run(blueprint, fresh=True)
    run.refresh_from_db()
    assert run.status == "done", run.status
    return run


@pytest.fixture
def signed(fake_provider):
    _script(fake_provider)
    return _start(THRESHOLD, "signed.yml")


@pytest.fixture
def unsigned(fake_provider):
    _script(fake_provider)
    return _start(NO_THRESHOLD, "unsigned.yml")


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split()).replace(" ,", ",")


def _section(html: str, start_marker: str, end_marker: str = "</section>") -> str:
    start = html.index(start_marker)
    return html[start:html.index(end_marker, start)]


def _expected_pass(prompt_id: str, variant: str) -> bool:
    return pass_at_k(GOOD_TRIALS[(prompt_id, variant)]) >= 0.8


def test_the_trials_are_what_the_fake_server_was_told_and_the_formula_decides(signed):
    for (prompt_id, variant), good in GOOD_TRIALS.items():
        scores = sorted(Response.objects.filter(run=signed, prompt_id=prompt_id, variant_id=variant)
                        .values_list("score", flat=True))
        assert scores == [0.0] * (3 - good) + [1.0] * good, (prompt_id, variant)
    # 3 of 3: 1.0 pass; 2 of 3: 0.963 pass; 1 of 3: 0.704 fail; 0 of 3: 0 fail.
    assert [round(pass_at_k(g), 3) for g in (3, 2, 1, 0)] == [1.0, 0.963, 0.704, 0.0]
    assert {k: _expected_pass(*k) for k in GOOD_TRIALS} == {
        ("three-good", A): True, ("two-good", A): True, ("one-good", A): False,
        ("three-good", B): False, ("two-good", B): False, ("one-good", B): True}


def test_every_page_counts_the_same_cells_as_passed(client, signed):
    """The grid's pass rate, the run page's per-model table, its verdicts table and the exports: cand-a passes
    2 of 3 cells (pass@k), cand-b 1 of 3. The old grid counted cell scores at or above its 0.8 score cut (1 of
    3, "33%", for cand-a) while the run page's verdicts passed 2 of 3."""
    grid = client.get(f"/runs/{signed.pk}/results").content.decode()
    models = _section(grid, 'id="model-stats"', "</table>")
    line_a = _text(re.search(rf"<code>{re.escape(A)}</code></th>(.*?)</tr>", models, re.S).group(1))
    line_b = _text(re.search(rf"<code>{re.escape(B)}</code></th>(.*?)</tr>", models, re.S).group(1))
    assert line_a.startswith("67% (2/3 passed)"), line_a
    assert line_b.startswith("33% (1/3 passed)"), line_b
    # The view's score cut does not move the pass rate: it is the blueprint's rule, not the view's.
    cut = client.get(f"/runs/{signed.pk}/results?threshold=0.2").content.decode()
    assert "67% (2/3 passed)" in _text(_section(cut, 'id="model-stats"', "</table>"))

    run_page = client.get(f"/runs/{signed.pk}/").content.decode()
    table = _section(run_page, 'class="variants-table"', "</table>")
    row_a = _text(re.search(rf"<code>{re.escape(A)}</code></th>(.*?)</tr>", table, re.S).group(1))
    assert "2 of 3 (67%)" in row_a, row_a
    verdicts = _section(run_page, 'aria-labelledby="verdicts-heading"')
    columns = re.findall(r'<th scope="col"><code>([^<]+)</code></th>', verdicts)
    for prompt_id in ("three-good", "two-good", "one-good"):
        row = re.search(rf"<th scope=\"row\"><code>{prompt_id}</code></th>(.*?)</tr>", verdicts, re.S).group(1)
        cells = re.findall(r"<td>(.*?)</td>", row, re.S)
        for variant, cell in zip(columns, cells):
            word = "passed" if _expected_pass(prompt_id, variant) else "did not pass"
            assert f">{word}<" in cell, (prompt_id, variant, cell)

    # The JSON export (and so the API's results) and the grid's CSV say the same.
    for data in (client.get(f"/runs/{signed.pk}/export.json").json(),
                 client.get(f"/api/runs/{signed.pk}/results").json()):
        ours = data["evalsite"]["responses"]
        assert {(p, v): ours[p][v]["passed"] for p, v in GOOD_TRIALS} == {k: _expected_pass(*k) for k in GOOD_TRIALS}
    rows = list(csv.DictReader(io.StringIO(client.get(f"/runs/{signed.pk}/results.csv").content.decode())))
    assert {(r["prompt_id"], r["model_id"]): r["passed"] for r in rows} == {
        k: "passed" if _expected_pass(*k) else "did not pass" for k in GOOD_TRIALS}
    # The grid's "did not pass" filter keeps exactly the cells that did not pass.
    failing = list(csv.DictReader(io.StringIO(
        client.get(f"/runs/{signed.pk}/results.csv?filter=not-passed").content.decode())))
    assert {(r["prompt_id"], r["model_id"]) for r in failing} == {k for k in GOOD_TRIALS if not _expected_pass(*k)}


def test_without_a_threshold_no_page_shows_a_pass_rate_or_a_count_of_passes(client, unsigned):
    """Three trials scoring 1.00 each, no threshold: the old run page said "no verdict 0/3 passed" and the grid
    "100% (2/2)"; a cell with no pass mark neither passes nor fails, and every page says so."""
    assert set(Response.objects.filter(run=unsigned).values_list("score", flat=True)) == {1.0}
    run_page = client.get(f"/runs/{unsigned.pk}/").content.decode()
    verdicts = _text(_section(run_page, '<table class="verdicts-table', "</table>"))
    assert "no verdict" not in verdicts and "0/3" not in verdicts and "passed" not in verdicts.split("Prompt")[1]
    assert verdicts.count("no threshold set") >= 2 and "1.00 mean of 3 trials" in verdicts
    table = _text(_section(run_page, 'class="variants-table"', "</table>"))
    assert table.count("no threshold set") == 2

    grid = client.get(f"/runs/{unsigned.pk}/results").content.decode()
    models = _text(_section(grid, 'id="model-stats"', "</table>"))
    assert models.count("no threshold set") == 2 and "%" not in models.split("Waiting")[1]

    response = Response.objects.filter(run=unsigned, variant_id=A).first()
    page = _text(client.get(f"/runs/{unsigned.pk}/responses/{response.pk}/").content.decode())
    assert "Cell score 1.00 mean of 3 trials no threshold set" in page and "no verdict" not in page
    rows = list(csv.DictReader(io.StringIO(client.get(f"/runs/{unsigned.pk}/export.csv").content.decode())))
    assert {r["cell_passed"] for r in rows} == {"no threshold set"}


def test_the_response_page_of_a_trial_leads_with_its_cell(client, signed):
    """A bad trial of cand-a's two-good cell (0.67, passed by pass@k): the big score is the cell's with its rule,
    then the trial's own, labelled; the other model's chip is its cell score, linked to its trial of the same
    number."""
    bad = Response.objects.get(run=signed, prompt_id="two-good", variant_id=A, score=0.0)
    html = client.get(f"/runs/{signed.pk}/responses/{bad.pk}/").content.decode()
    summary = _section(html, 'id="score-summary"')
    assert re.findall(r'class="score-chip score-big [^"]*">([^<]+)<', summary) == ["0.67"]
    text = _text(summary)
    assert text.index("Cell score 0.67 pass@k of 3 trials passed") < text.index(f"Trial {bad.trial + 1} of 3 0.00")

    chips = _section(html, 'class="sibling-links"', "</nav>")
    other = re.search(r'<a class="sibling" href="/runs/\d+/responses/(\d+)/"[^>]*><code>([^<]+)</code>(.*?)</a>',
                      chips, re.S)
    assert other.group(2) == B
    assert _text(other.group(3)).startswith("0.33 pass@k of 3 trials")  # cand-b's cell, not one of its trials
    linked = Response.objects.get(pk=int(other.group(1)))
    assert (linked.variant_id, linked.prompt_id, linked.trial) == (B, "two-good", bad.trial)


def test_the_prompt_page_heads_each_column_with_its_cell_score(client, signed):
    index = next(i for i, p in enumerate(("three-good", "two-good", "one-good")) if p == "two-good")
    html = client.get(f"/runs/{signed.pk}/prompts/{index}/").content.decode()
    head = _section(html, "<thead>", "</thead>")
    heads = {m.group(1): _text(m.group(2)) for m in re.finditer(
        r'<th scope="col" class="variant-col"><a [^>]*><code>([^<]+)</code></a>(.*?)</th>', head, re.S)}
    assert heads == {A: "cell 0.67 pass@k of 3 trials", B: "cell 0.33 pass@k of 3 trials"}
    assert "Score of the trial shown" in html
    # Each card: the cell (score, rule, whether it passed) before the trial it shows, labelled.
    cards = _text(_section(html, 'aria-labelledby="responses-heading"'))
    assert "Cell 0.67, pass@k of 3 trials passed" in cards and "Cell 0.33, pass@k of 3 trials did not pass" in cards
    assert re.search(r"Trial [123] of 3", cards)


def _validate(path) -> tuple[str, dict]:
    out, err = StringIO(), StringIO()
    call_command("validate_blueprint", str(path), stdout=out, stderr=err)
    js = StringIO()
    call_command("validate_blueprint", str(path), "--json", stdout=js, stderr=StringIO())
    return out.getvalue() + err.getvalue(), json.loads(js.getvalue())


def test_the_validator_warns_when_pass_at_k_has_no_threshold_to_pass(tmp_path):
    prompt_level = tmp_path / "prompt.yml"
    prompt_level.write_text("title: t\nmodels: [openai:a]\n---\n- id: p\n  prompt: hi\n  trials: 3\n"
                            "  trial_aggregation: pass_at_k\n  should: [$contains: x]\n"
                            "- id: q\n  prompt: ho\n  trials: 3\n  trial_aggregation: pass_at_k\n  threshold: 0.8\n"
                            "  should: [$contains: x]\n")
    printed, data = _validate(prompt_level)
    warnings = [w for f in data for w in f["warnings"] if "pass_at_k" in w["message"]]
    assert len(warnings) == 1, warnings  # prompt q has a threshold: no warning
    (w,) = warnings
    assert (w["line"], w["column"], w["path"]) == (7, 3, "prompts[0].trial_aggregation")
    assert "prompt 'p'" in w["message"] and "threshold: 0.8" in w["hint"]
    assert "prompt.yml:7:3: warning:" in printed

    header_level = tmp_path / "header.yml"
    header_level.write_text("title: t\nmodels: [openai:a]\ntrials: 2\ntrial_aggregation: pass_at_k\n---\n"
                            "- id: p\n  prompt: hi\n  should: [$contains: x]\n"
                            "- id: q\n  prompt: ho\n  should: [$contains: x]\n")
    _, data = _validate(header_level)
    warnings = [w for f in data for w in f["warnings"] if "pass_at_k" in w["message"]]
    assert [(w["line"], w["path"]) for w in warnings] == [(4, "trial_aggregation")]  # once, at the header's key

    # A header threshold covers every prompt; a gate (`required`) is a pass mark too.
    for header, gated in (("threshold: 0.7\n", ""), ("", "      required: true\n")):
        fine = tmp_path / "fine.yml"
        fine.write_text(f"title: t\nmodels: [openai:a]\n{header}trial_aggregation: pass_at_k\n---\n"
                        f"- id: p\n  prompt: hi\n  should:\n    - $contains: x\n{gated}")
        _, data = _validate(fine)
        assert data[0]["ok"] and not [w for f in data for w in f["warnings"] if "pass_at_k" in w["message"]]
