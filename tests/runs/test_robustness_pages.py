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


def test_people_preferring_b_on_the_pairs_page_add_a_style_flip_to_a_robust_decision(fake_provider, client):
    """The robust run (cand-a better under 4 of 4) with people's Pairs judgements: every one prefers cand-b's
    answer (answers of about the same length, no markdown), so the style-controlled rating says cand-a is worse and
    the pair gains the "style" alternative, which flips it. Judgements added after a first look count (the kept
    answer is keyed by them); an LLM judge's Pairs answers are not people's and add nothing."""
    from runs.models import PairJudgement, PairJudging, Response

    run = _run(fake_provider, reverse=False)
    code, out, _ = compare(run.pk, "--json")
    assert json.loads(out)["pairs"][0]["robustness"]["alternatives"] == 4
    rows = {(r.prompt_id, r.variant_id): r for r in Response.objects.filter(run=run)}
    job = PairJudging.objects.create(run=run, blueprint=run.blueprint, model_id="openai:judge-a",
                                     pairs_requested=12)
    for i in range(PROMPTS):  # an LLM judge preferring cand-a: not people's, not counted
        PairJudgement.objects.create(left=rows[(f"q{i:02d}", A)], right=rows[(f"q{i:02d}", B)], winner="left",
                                     who="judge:openai:judge-a", judging=job)
    code, out, _ = compare(run.pk, "--json")
    assert json.loads(out)["pairs"][0]["robustness"]["alternatives"] == 4
    for i in range(PROMPTS):
        a, b = rows[(f"q{i:02d}", A)], rows[(f"q{i:02d}", B)]
        PairJudgement.objects.create(left=a, right=b, winner="right", who="ann")
        PairJudgement.objects.create(left=b, right=a, winner="left", who="bob")
    code, out, _ = compare(run.pk, "--json")
    (pair,) = json.loads(out)["pairs"]
    assert pair["verdict"] == "better"
    robust = pair["robustness"]
    assert (robust["alternatives"], robust["same"]) == (5, 4)
    assert robust["flips"] == [{"what": "the Pairs rating controlled for style decides", "kind": "style",
                                "verdict": "worse"}]
    line = (f"{A} better than {B} under 4 of 5 alternatives; it flips if the Pairs rating controlled for style "
            "decides (worse)")
    assert robust["line"] == line
    assert line in _text(client.get(f"/runs/{run.pk}/compare").content.decode())
    api = client.get(f"/api/runs/{run.pk}/compare").json()
    assert api["pairs"][0]["robustness"] == robust
