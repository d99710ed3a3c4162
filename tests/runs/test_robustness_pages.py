"""What would flip a decision, through the doors a user takes: ``compare --json`` and ``--markdown``, the compare
page and the run page's model table. Runs are made through the production path against the fake LLM server, with
two judges; the robustness is read from the stored results without a call."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest

from blueprints.importing import import_files
from runs import start as run_start
from tests.cli.test_compare_command import compare
from tests.fakes.pytest_fixtures import fake_llm, fake_llm_server, fake_provider  # noqa: F401
from tests.web.conftest import htmx

pytestmark = pytest.mark.django_db(transaction=True)

A, B = "openai:cand-a[temp:0]", "openai:cand-b[temp:0]"
PROMPTS = 12
TEXT = ("title: Flip\nmodels: [openai:cand-a, openai:cand-b]\nevaluationConfig:\n  llm-coverage:\n    judges:\n"
        "      - {id: judge-a, model: openai:judge-a, approach: standard}\n"
        "      - {id: judge-b, model: openai:judge-b, approach: standard}\n---\n"
        + "".join(f"- id: q{i:02d}\n  prompt: Question number {i}?\n  tags: [{'safety' if i < 3 else 'general'}]\n"
                  f"  should:\n    - Answers the question well\n" for i in range(PROMPTS)))


def _judge(model: str, text: str, label: str) -> dict:
    return {"model": model, "match": rf"(?s)<TEXT>\n{text}",
            "reply": f"<reflection>So.</reflection><classification>{label}</classification>"}


def _run(fake_provider, *, reverse: bool):
    """judge-a: cand-a fully, cand-b not at all. judge-b: with ``reverse`` cand-a partly (0.25) and cand-b mostly
    (0.75), so the consensus prefers cand-a (0.625 to 0.375) and judge-b alone cand-b; else as judge-a, milder."""
    blueprint = import_files([("flip.yml", TEXT, {})], via="test").items[0].blueprint
    fake_provider.script([
        {"model": "cand-a", "match": ".", "reply": "ALPHA answer"},
        {"model": "cand-b", "match": ".", "reply": "BETA answer"},
        _judge("judge-a", "ALPHA", "CLASS_EXACTLY_MET"), _judge("judge-a", "BETA", "CLASS_UNMET"),
        _judge("judge-b", "ALPHA", "CLASS_PARTIALLY_MET" if reverse else "CLASS_MAJORLY_MET"),
        _judge("judge-b", "BETA", "CLASS_MAJORLY_MET" if reverse else "CLASS_PARTIALLY_MET")])
    run = run_start.start_run(blueprint, fresh=True)
    run.refresh_from_db()
    assert run.status == "done"
    return run


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_when_one_judge_alone_reverses_the_winner_every_door_names_that_judge(fake_provider, client):
    run = _run(fake_provider, reverse=True)
    calls = len(fake_provider.requests())
    code, out, _ = compare(run.pk, "--json")
    assert code == 0
    (pair,) = json.loads(out)["pairs"]
    assert (pair["a"], pair["b"], pair["verdict"]) == (A, B, "better")
    robust = pair["robustness"]
    # judge-a alone, judge-b alone, the tag 'safety' left out, the tag 'general' left out
    assert robust["alternatives"] == 4 and robust["same"] == 3
    assert robust["flips"] == [{"what": "judge judge-b alone decides", "kind": "judge", "verdict": "worse"}]
    line = f"{A} better than {B} under 3 of 4 alternatives; it flips if judge judge-b alone decides (worse)"
    assert robust["line"] == line
    code, out, _ = compare(run.pk, "--markdown")
    assert f"- {line}" in re.sub(r"\\(.)", r"\1", out) and len(out.splitlines()) <= 60
    assert "openai:cand-a\\[temp:0\\] better than" in out  # names from a blueprint or a model id: no markdown of their own
    assert line in _text(client.get(f"/runs/{run.pk}/compare").content.decode())
    assert line in _text(client.get(f"/runs/{run.pk}/compare?part=models", **htmx()).content.decode())
    assert len(fake_provider.requests()) == calls  # from stored results: no call


def test_a_robust_decision_says_no_single_alternative_flips_it_across_two_runs(fake_provider, client):
    base = _run(fake_provider, reverse=True)
    run = _run(fake_provider, reverse=False)  # cand-a's consensus rises from 0.625 to 0.875, by both judges
    code, out, _ = compare(run.pk, "--base", base.pk, "--json")
    pairs = {p["a"]: p for p in json.loads(out)["pairs"]}
    assert pairs[A]["verdict"] == "better"
    # judge-a alone sees no change in cand-a (1.0 both times): can't tell; judge-b alone sees 0.25 -> 0.75
    assert pairs[A]["robustness"]["flips"] == [
        {"what": "judge judge-a alone decides", "kind": "judge", "verdict": "cant_tell"}]
    # The compare page loads it in place (?part=robustness: seconds on a run of 100,000 responses).
    page = client.get(f"/runs/{run.pk}/compare?with={base.pk}").content.decode()
    assert f"/runs/{run.pk}/compare?with={base.pk}&amp;part=robustness" in page
    part = _text(client.get(f"/runs/{run.pk}/compare?with={base.pk}&part=robustness", **htmx()).content.decode())
    assert pairs[A]["robustness"]["line"] in part
    code, out, _ = compare(run.pk, "--json")
    (pair,) = json.loads(out)["pairs"]
    assert pair["verdict"] == "better"
    assert pair["robustness"]["line"] == f"{A} better than {B} under 4 of 4 alternatives; no single alternative flips it"
