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
