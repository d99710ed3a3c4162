"""``manage.py compare``: its JSON shape, its markdown, and its exit codes, on runs made through the production path
(start -> worker tasks, inline -> records) against the fake LLM server; and the same figures from the API."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import call_command

from blueprints.importing import import_files
from runs import start as run_start
from runs.models import Run
from tests.fakes.pytest_fixtures import fake_llm, fake_llm_server, fake_provider  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

PROMPTS = 12
A, B = "openai:cand-a[temp:0]", "openai:cand-b[temp:0]"


def _text(changed: int | None = None) -> str:
    body = "".join(f"- id: q{i:02d}\n  prompt: Question number {i}{' (reworded)' if i == changed else ''}?\n"
                   f"  should:\n    - $contains: GOOD\n" for i in range(PROMPTS))
    return "title: Gate\nmodels: [openai:cand-a, openai:cand-b]\n---\n" + body


def _run(fake_provider, blueprint, *, a_bad=(), b_bad=()) -> Run:
    """A finished run: cand-a answers BAD to the prompts numbered in ``a_bad``, GOOD to the rest (cand-b alike)."""
    rules = [{"model": "cand-a", "match": rf"Question number {i}\b", "reply": "BAD answer"} for i in a_bad]
    rules += [{"model": "cand-b", "match": rf"Question number {i}\b", "reply": "BAD answer"} for i in b_bad]
    rules += [{"model": "cand-a", "match": ".", "reply": "GOOD answer"},
              {"model": "cand-b", "match": ".", "reply": "GOOD answer"}]
    fake_provider.script(rules)
    run = run_start.start_run(blueprint, fresh=True)
    run.refresh_from_db()
    assert run.status == "done", run.status
    return run


@pytest.fixture
def blueprint(fake_provider):
    return import_files([("gate.yml", _text(), {})], via="test").items[0].blueprint


def compare(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("compare", *[str(a) for a in args], stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


def test_json_with_a_base_has_one_pair_per_variant_and_the_gate_fails_on_a_regression(fake_provider, blueprint):
    base = _run(fake_provider, blueprint)
    later = _run(fake_provider, blueprint, a_bad=range(PROMPTS))  # cand-a now fails every prompt
    code, out, _ = compare(later.pk, "--base", base.pk, "--json")
    assert code == 0
    data = json.loads(out)
    pairs = {p["a"]: p for p in data["pairs"]}
    assert set(pairs) == {A, B}
    for pair in data["pairs"]:
        assert {"a", "b", "delta", "low", "high", "verdict", "n"} <= set(pair)
        assert pair["a"] == pair["b"]  # with --base: a is RUN's variant, b the same variant of BASE
        assert pair["verdict"] in ("better", "worse", "cant_tell")
    assert pairs[A]["delta"] == pytest.approx(-1.0) and pairs[A]["verdict"] == "worse"
    assert pairs[A]["low"] <= pairs[A]["delta"] <= pairs[A]["high"] < 0 and pairs[A]["n"] == PROMPTS
    assert pairs[B]["delta"] == pytest.approx(0.0) and pairs[B]["verdict"] == "cant_tell"
    assert data["regression"] is True and data["leftOut"] == 0

    code, _, err = compare(later.pk, "--base", base.pk, "--fail-on-regression")
    assert code == 1 and A in err
    # The other way round cand-a got better: no regression, the gate passes.
    code, out, _ = compare(base.pk, "--base", later.pk, "--json", "--fail-on-regression")
    assert code == 0 and {p["a"]: p["verdict"] for p in json.loads(out)["pairs"]}[A] == "better"


def test_an_unchanged_rerun_passes_the_gate(fake_provider, blueprint):
    base = _run(fake_provider, blueprint, b_bad=(3, 7))
    again = _run(fake_provider, blueprint, b_bad=(3, 7))
    code, out, _ = compare(again.pk, "--base", base.pk, "--json", "--fail-on-regression")
    assert code == 0
    assert all(p["verdict"] == "cant_tell" and p["delta"] == 0 for p in json.loads(out)["pairs"])


def test_without_a_base_the_variants_are_compared_with_each_other(fake_provider, blueprint):
    run = _run(fake_provider, blueprint, b_bad=range(0, PROMPTS, 2))  # cand-b fails half the prompts
    code, out, _ = compare(run.pk, "--json", "--fail-on-regression")
    assert code == 0  # nothing to gate on without a base
    data = json.loads(out)
    assert len(data["pairs"]) == 1
    pair = data["pairs"][0]
    assert (pair["a"], pair["b"]) == (A, B)  # the better mean first
    assert pair["delta"] == pytest.approx(0.5) and pair["verdict"] == "better" and pair["n"] == PROMPTS
    assert data["models"][A]["mean"] == pytest.approx(1.0)
    assert data["models"][B]["low"] < 0.5 < data["models"][B]["high"]


def test_markdown_links_each_regression_to_its_diff_and_stays_short(fake_provider, blueprint):
    base = _run(fake_provider, blueprint)
    later = _run(fake_provider, blueprint, a_bad=(1, 4, 9))
    code, out, _ = compare(later.pk, "--base", base.pk, "--markdown")
    assert code == 0 and len(out.splitlines()) <= 60
    for i in (1, 4, 9):
        assert f"(/runs/{later.pk}/compare/{base.pk}/diff?prompt=q{i:02d}&variant=openai%3Acand-a%5Btemp%3A0%5D)" in out
    code, out, _ = compare(later.pk, "--base", base.pk, "--markdown", "--base-url", "https://evals.example/")
    assert f"(https://evals.example/runs/{later.pk}/compare/{base.pk}/diff?prompt=q01&" in out
    assert re.search(r"\| `openai:cand-a\[temp:0\]` \| 1\.00 \| 0\.75 \| -0\.25 \|", out)


def test_prompts_whose_text_changed_are_named_and_left_out(fake_provider, blueprint):
    base = _run(fake_provider, blueprint)
    blueprint.save_revision(_text(changed=5))
    later = _run(fake_provider, blueprint, a_bad=(5,))
    code, out, _ = compare(later.pk, "--base", base.pk, "--json")
    data = json.loads(out)
    assert data["changedPrompts"] == ["q05"] and data["leftOut"] == 1
    assert all(p["n"] == PROMPTS - 1 and p["delta"] == 0 for p in data["pairs"])


def test_the_api_answers_the_same_pairs(fake_provider, blueprint, client):
    base = _run(fake_provider, blueprint)
    later = _run(fake_provider, blueprint, a_bad=range(PROMPTS))
    _, out, _ = compare(later.pk, "--base", base.pk, "--json")
    answer = client.get(f"/api/runs/{later.pk}/compare?base={base.pk}")
    assert answer.status_code == 200 and answer.json()["pairs"] == json.loads(out)["pairs"]
    assert client.get(f"/api/runs/{later.pk}/compare?base=x").status_code == 400
    assert client.get(f"/api/runs/{later.pk}/compare?base=99999").status_code == 404
    assert len(client.get(f"/api/runs/{later.pk}/compare").json()["pairs"]) == 1


def test_bad_arguments_exit_2(fake_provider, blueprint):
    run = _run(fake_provider, blueprint)
    assert compare(99999)[0] == 2
    assert compare(run.pk, "--base", 99999)[0] == 2
