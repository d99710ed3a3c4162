"""One door to start a run (the run form, as the browser posts it): an empty choice is refused, the
confirmation never prices the unknown at $0, the estimate gives two figures, judges and a backup judge can be
chosen, and each post is read once, planned once and estimated once."""

import json
import re
from collections import Counter
from html import unescape
from pathlib import Path

import pytest

from blueprints.models import Blueprint
from runs import start as run_start
from runs.models import Response, Run
from runs.request import RunRequest
from tests.web.conftest import VALID, htmx

pytestmark = pytest.mark.django_db(transaction=True)

MODELS = ["openai:gpt-4.1-mini", "openai:gpt-4.1-nano", "openai:gpt-4o-mini"]
THREE = VALID.replace("  - openai:gpt-4.1-mini\n", "".join(f"  - {m}\n" for m in MODELS))
PRICES = json.loads((Path(__file__).parents[2] / "runs/engine/providers/prices.json").read_text())["models"]


@pytest.fixture(autouse=True)
def _offline(monkeypatch, settings):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    settings.EVALSITE_DEFAULT_JUDGES = ["openai:gpt-4.1-mini"]
    settings.EVALSITE_BACKUP_JUDGE = ""


def _blueprint(text=THREE):
    blueprint = Blueprint.objects.create(slug="capitals", title="")
    blueprint.save_revision(text)
    return blueprint


def _form(models=(), **more):
    """The run form as the browser posts it: the boxes it offered, the ones ticked."""
    return {"blueprint": "capitals", "revision": "1", "models_offered": MODELS, "models": list(models),
            "judges_offered": ["holistic-gpt-4-1-mini(openai:gpt-4.1-mini)"],
            "judges": ["holistic-gpt-4-1-mini(openai:gpt-4.1-mini)"], "backup_judge": "", **more}


def _text(response) -> str:
    return unescape(response.content.decode())


def test_no_model_ticked_is_refused_by_the_estimate_and_by_start_and_nothing_starts(client):
    _blueprint()

    estimate = _text(client.post("/runs/form/capitals/", _form(), **htmx()))
    start = client.post("/runs/form/capitals/", _form(start="1"))
    old_door = client.post("/runs/start", _form(), follow=True)

    assert "no models chosen" in estimate and 'class="estimate-calls"' not in estimate
    assert start.status_code == 200 and "Not started: Models: no models chosen: tick at least one model" in _text(start)
    assert "no models chosen" in _text(old_door)
    assert Run.objects.count() == 0 and Response.objects.count() == 0
    # A model typed into "Add models" is a choice: it runs alone.
    only_added = _text(client.post("/runs/form/capitals/", _form(add_models="openai:gpt-4.1"), **htmx()))
    assert re.search(r'class="estimate-generations">1<', only_added)


def test_the_confirmation_counts_the_unpriced_calls_and_prints_no_dollar_figure(client, settings):
    settings.EVALSITE_CONFIRM_CALLS = 5
    _blueprint(VALID.replace("  - openai:gpt-4.1-mini\n", "  - openai:gpt-4.1-mini\n  - openai:no-price-here\n"))
    form = {"blueprint": "capitals", "revision": "1", "models_offered": ["openai:gpt-4.1-mini", "openai:no-price-here"],
            "models": ["openai:gpt-4.1-mini", "openai:no-price-here"], "trials": "2", "start": "1"}

    refused = _text(client.post("/runs/form/capitals/", form))

    label = re.search(r'<label for="id_confirm">([^<]+)</label>', refused).group(1)
    # 2 models x 2 trials generations, and the judge once for each response: 8 calls, 2 to the unpriced model
    assert label == "I expect 8 calls, 2 of them to models with no price, whose cost is unknown"
    assert "$" not in label and "Not started: this run would make 8 calls, 2 of them to models with no price" in refused
    key = re.search(r'name="confirm" value="([^"]+)"', refused).group(1)
    assert client.post("/runs/form/capitals/", {**form, "confirm": key}).status_code == 302
    assert Run.objects.count() == 1


def _price(model, input_tokens, output_tokens):
    price = PRICES[model]
    return (input_tokens * price["input"] + output_tokens * price["output"]) / 1_000_000


def test_the_estimate_gives_expected_at_earlier_answer_lengths_and_the_most_at_max_tokens(client):
    blueprint = _blueprint(VALID)
    one = {"blueprint": "capitals", "revision": "1", "models_offered": ["openai:gpt-4.1-mini"],
           "models": ["openai:gpt-4.1-mini"]}

    assumed = _text(client.post("/runs/form/capitals/", one, **htmx()))
    assert "'openai:gpt-4.1-mini': 300 tokens an answer (an assumption" in assumed

    run = run_start.start_run(blueprint, enqueue=False)
    Response.objects.filter(run=run).update(status="done", output_tokens=40)
    earlier = run_start.start_run(blueprint, enqueue=False)
    Response.objects.filter(run=earlier).update(status="done", output_tokens=20)
    observed = _text(client.post("/runs/form/capitals/", one, **htmx()))
    assert "'openai:gpt-4.1-mini': 30 tokens an answer, the mean of 2 earlier answers" in observed

    # The two figures, against the published per-million prices: one generation, one judge call.
    planned = run_start.plan_start(blueprint)
    estimate = run_start.estimate_start(planned)
    candidate, judge = estimate.candidates[0], estimate.judges[0]
    assert (candidate.output_tokens, candidate.expected_output_tokens) == (1500, 30)
    assert (judge.output_tokens, judge.expected_output_tokens) == (500, 150)
    most = _price("openai:gpt-4.1-mini", candidate.input_tokens, 1500) + _price("openai:gpt-4.1-mini",
                                                                               judge.input_tokens, 500)
    expected = _price("openai:gpt-4.1-mini", candidate.expected_input_tokens, 30) + \
        _price("openai:gpt-4.1-mini", judge.expected_input_tokens, 150)
    assert estimate.most_cost == pytest.approx(most) and estimate.expected_cost == pytest.approx(expected)
    assert judge.expected_input_tokens < judge.input_tokens  # the judge reads a 30-token answer, not 1500
    assert f"about ${expected:.4f}" in observed and f"at most <strong class=\"estimate-most\">${most:.4f}" in \
        observed.replace("&quot;", '"')


def test_judges_and_a_backup_judge_are_chosen_on_the_form_by_the_commands_rule(client):
    _blueprint(VALID)
    one = {"blueprint": "capitals", "revision": "1", "models_offered": ["openai:gpt-4.1-mini"],
           "models": ["openai:gpt-4.1-mini"], "judges_offered": ["holistic-gpt-4-1-mini(openai:gpt-4.1-mini)"],
           "judges": ["holistic-gpt-4-1-mini(openai:gpt-4.1-mini)"]}

    page = _text(client.get("/runs/form/capitals/"))
    assert 'name="add_judges"' in page and 'name="backup_judge"' in page
    two = _text(client.post("/runs/form/capitals/", {**one, "add_judges": "anthropic:claude-haiku-4-5"}, **htmx()))
    assert re.search(r'class="estimate-judge-calls">2<', two)
    collection = _text(client.post("/runs/form/capitals/", {**one, "add_judges": "CORE"}, **htmx()))
    assert "Judges: 'CORE' names a collection; a judge is one model" in collection
    no_provider = _text(client.post("/runs/form/capitals/", {**one, "start": "1", "backup_judge": "gpt"}))
    assert "Backup judge: 'gpt' has no provider" in no_provider and Run.objects.count() == 0

    client.post("/runs/form/capitals/", {**one, "start": "1", "add_judges": "anthropic:claude-haiku-4-5",
                                         "backup_judge": "openai:gpt-4o-mini"})

    run = Run.objects.get()
    assert [j["model"] for j in run.judges["judges"]] == ["openai:gpt-4.1-mini", "anthropic:claude-haiku-4-5"]
    assert run.judges["backup"]["model"] == "openai:gpt-4o-mini"


def test_a_change_and_a_start_are_each_one_parse_one_plan_one_estimate(client, monkeypatch):
    _blueprint()
    counts = Counter()

    def counting(name, function):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return function(*args, **kwargs)
        return wrapper

    parse = RunRequest.from_form.__func__
    monkeypatch.setattr(RunRequest, "from_form", classmethod(counting("parse", parse)))
    monkeypatch.setattr(run_start, "plan_start", counting("plan", run_start.plan_start))
    monkeypatch.setattr(run_start, "estimate_run", counting("estimate", run_start.estimate_run))

    client.post("/runs/form/capitals/", _form(MODELS[:2]), **htmx())
    assert counts == {"parse": 1, "plan": 1, "estimate": 1}

    counts.clear()
    response = client.post("/runs/form/capitals/", _form(MODELS[:2], start="1"))
    assert response.status_code == 302 and Run.objects.count() == 1
    assert counts == {"parse": 1, "plan": 1, "estimate": 1}

    counts.clear()
    client.get("/runs/form/capitals/", **htmx())
    assert counts == {"plan": 1, "estimate": 1}  # the form as first offered: nothing posted to read


def test_with_no_judge_to_offer_the_form_is_still_offered_and_a_judge_can_be_added(client, settings):
    settings.EVALSITE_DEFAULT_JUDGES = []
    _blueprint(VALID)

    page = _text(client.get("/runs/form/capitals/"))
    assert 'name="models" value="openai:gpt-4.1-mini"' in page and 'name="add_judges"' in page
    assert "Cannot run as the form stands: no judge would score the judged points" in page

    added = _text(client.post("/runs/form/capitals/", {
        "blueprint": "capitals", "revision": "1", "models_offered": ["openai:gpt-4.1-mini"],
        "models": ["openai:gpt-4.1-mini"], "add_judges": "openai:gpt-4o-mini", "backup_judge": ""}, **htmx()))
    assert re.search(r'class="estimate-judge-calls">1<', added) and "backup judge: none" in added
