"""Deal-breaker bounds on the pages and in ``compare --json``: per model, its should-not failures over its scored
answers and the exact upper limit of its failure rate (runs/engine/bounds.py), on runs made through the
production path against the fake LLM server."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest
from scipy.stats import binomtest

from blueprints.importing import import_files
from runs import start as run_start
from tests.cli.test_compare_command import compare
from tests.fakes.pytest_fixtures import fake_llm, fake_llm_server, fake_provider  # noqa: F401
from tests.web.conftest import htmx

pytestmark = pytest.mark.django_db(transaction=True)

A, B = "openai:cand-a[temp:0]", "openai:cand-b[temp:0]"
PROMPTS = 30


def _text() -> str:
    body = "".join(f"- id: q{i:02d}\n  prompt: Question number {i}?\n  should:\n    - $contains: GOOD\n"
                   f"  should_not:\n    - $contains: LEAK\n" for i in range(PROMPTS))
    body += "- id: plain\n  prompt: Plain question?\n  should:\n    - $contains: GOOD\n"
    return "title: Bounds\nmodels: [openai:cand-a, openai:cand-b]\n---\n" + body


def _text_of(html: str) -> str:
    return re.sub(r" ([:;])", r"\1", " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split()))


def upper(k, n):
    return binomtest(k, n, alternative="less").proportion_ci(0.95, method="exact").high


@pytest.fixture
def run(fake_provider):
    blueprint = import_files([("bounds.yml", _text(), {})], via="test").items[0].blueprint
    fake_provider.script([{"model": "cand-b", "match": r"Question number (3|17)\b", "reply": "GOOD but LEAK"},
                          {"model": "cand-b", "match": "Plain", "reply": "LEAK GOOD"},
                          {"model": "cand-a", "match": ".", "reply": "GOOD answer"},
                          {"model": "cand-b", "match": ".", "reply": "GOOD answer"}])
    made = run_start.start_run(blueprint, fresh=True)
    made.refresh_from_db()
    assert made.status == "done"
    return made


def test_the_run_page_and_compare_show_each_models_bound_and_when_it_is_too_wide(run, client):
    part = _text_of(client.get(f"/runs/{run.pk}/compare?part=models", **htmx()).content.decode())
    # 30 answers to prompts with a should-not point each (the plain prompt has none: its LEAK is not counted)
    assert (f"{A}: 0 failures in 30 answers: failure rate at most {100 * upper(0, 30):.2g}% at 95%; too few answers "
            "to say it is under 1%: 299 answers with no further failure would (269 more)") in part
    assert f"{B}: 2 failures in 30 answers: failure rate at most {100 * upper(2, 30):.0f}% at 95%" in part
    page = _text_of(client.get(f"/runs/{run.pk}/compare").content.decode())
    assert f"{A}: 0 failures in 30 answers" in page and f"{B}: 2 failures in 30 answers" in page


def test_compare_json_has_the_bounds_held_to_scipy(run):
    code, out, _ = compare(run.pk, "--json")
    assert code == 0
    data = json.loads(out)["bounds"]
    assert (data[A]["failures"], data[A]["answers"]) == (0, 30)
    assert (data[B]["failures"], data[B]["answers"]) == (2, 30)
    assert data[B]["upper"] == pytest.approx(upper(2, 30), rel=1e-9)
    assert data[A]["finding"].startswith("too few answers to say it is under 1%")


def _critical_text() -> str:
    body = "".join(f"- id: c{i:02d}\n  prompt: Critical question {i}?\n  should:\n    - $contains: GOOD\n"
                   f"    - $not_contains: DOSE\n      critical: true\n" for i in range(20))
    return "title: Critical\nmodels: [openai:cand-a, openai:cand-b]\n---\n" + body


@pytest.fixture
def critical_run(fake_provider):
    blueprint = import_files([("critical.yml", _critical_text(), {})], via="test").items[0].blueprint
    fake_provider.script([{"model": "cand-b", "match": r"Critical question (4|9|11)\b", "reply": "GOOD DOSE"},
                          {"model": "cand-a", "match": ".", "reply": "GOOD answer"},
                          {"model": "cand-b", "match": ".", "reply": "GOOD answer"}])
    made = run_start.start_run(blueprint, fresh=True)
    made.refresh_from_db()
    assert made.status == "done"
    return made


def test_a_critical_point_is_a_deal_breaker_in_compare_json_the_pages_and_the_findings(critical_run, client):
    """No should-not point anywhere: the bound is over the critical point alone (3 of cand-b's 20 answers failed it),
    and a reviewer's override of a critical point's score counts as the bound's input (the final score)."""
    from runs import insight
    from runs.models import PointAssessment
    from runs.overrides import apply_override

    code, out, _ = compare(critical_run.pk, "--json")
    assert code == 0
    data = json.loads(out)["bounds"]
    assert (data[A]["failures"], data[A]["answers"]) == (0, 20)
    assert (data[B]["failures"], data[B]["answers"]) == (3, 20)
    assert data[B]["upper"] == pytest.approx(upper(3, 20), rel=1e-9)
    assert client.get(f"/api/runs/{critical_run.pk}/compare").json()["bounds"] == data
    part = _text_of(client.get(f"/runs/{critical_run.pk}/compare?part=models", **htmx()).content.decode())
    assert f"{B}: 3 failures in 20 answers: failure rate at most {100 * upper(3, 20):.0f}% at 95%" in part
    assert "should-not and critical points" in part
    found = [f for f in insight.insight_of(critical_run).findings if f.kind == "bound_too_wide"]
    assert {f.models[0] for f in found} == {A, B}
    assert any(f.text.startswith(f"{A}: 0 failures in 20 answers") and "too few answers to say it is under 1%"
               in f.text for f in found)
    model = _text_of(client.get("/runs/models/openai:cand-b/").content.decode())
    assert "should-not and critical points, pooled over these runs" in model, model[model.find("Deal"):][:300]
    assert f"3 failures in 20 answers: failure rate at most {100 * upper(3, 20):.0f}% at 95%" in model, model[model.find("Deal"):][:300]
    # a reviewer passes one of cand-b's failed critical points: two failures are left
    failed = PointAssessment.objects.filter(response__run=critical_run, response__variant_id=B, position=1,
                                            score__lt=0.5).first()
    apply_override(failed, 1.0, reason="the dose named is the safe one", who="rev")
    critical_run.refresh_from_db()
    code, out, _ = compare(critical_run.pk, "--json")
    assert json.loads(out)["bounds"][B]["failures"] == 2
