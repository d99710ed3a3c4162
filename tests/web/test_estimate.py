"""The run form's estimate is the bill: it follows the form, equals the calls a run makes, and asks first past
the thresholds (EVALSITE_CONFIRM_USD, EVALSITE_CONFIRM_CALLS)."""

import json
import re
from html import unescape

import pytest

from blueprints.importing import import_files
from blueprints.models import Blueprint
from runs import start as run_start
from runs.models import Run
from tests.fakes.pytest_fixtures import fake_llm, fake_llm_server, fake_provider  # noqa: F401
from tests.web.conftest import VALID, htmx

JUDGE_REPLY = "<reflection>It does.</reflection>\n<classification>CLASS_EXACTLY_MET</classification>"
TRIALS = """\
title: Bill
models: [openai:cand-a, openai:cand-b, openai:cand-c]
temperatures: [0, 0.7]
evaluationConfig:
  llm-coverage:
    judges:
      - model: openai:judge-one
        approach: holistic
      - model: openai:judge-two
        approach: standard
---
- id: colour
  prompt: Name a colour.
  trials: 2
  should:
    - Names a colour.
    - $contains: e
- id: chat
  messages:
    - user: Hello there.
    - assistant: null
    - user: And again?
  should:
    - Answers twice.
  should_not:
    - Is rude.
"""


def _estimate(client, slug, data):
    response = client.post(f"/runs/form/{slug}/", data, **htmx())
    assert response.status_code == 200
    return response.content.decode()


def _figures(fragment):
    calls = int(re.search(r'class="estimate-calls">(\d+)<', fragment).group(1))
    generations = int(re.search(r'class="estimate-generations">(\d+)<', fragment).group(1))
    judges = int(re.search(r'class="estimate-judge-calls">(\d+)<', fragment).group(1))
    cost = re.search(r'class="estimate-cost">([^<]+)<', fragment).group(1)
    return calls, generations, judges, cost


@pytest.mark.django_db(transaction=True)
def test_the_estimated_calls_are_the_calls_a_run_makes(fake_provider):
    fake_provider.script([{"model": "judge", "match": "CRITERION", "reply": JUDGE_REPLY}])
    blueprint = import_files([("bill.yml", TRIALS, {})], via="test").items[0].blueprint
    estimate = run_start.estimate_start(run_start.plan_start(blueprint), trials=3, fresh=True)

    run = run_start.start_run(blueprint, trials=3, fresh=True)
    run.refresh_from_db()

    assert run.status == "done" and run.items_failed == 0
    sent = fake_provider.requests()
    # 2 prompts x 6 variants x 3 trials; colour 1 turn, chat 2 turns; 1 + 2 judged points, 2 judges
    assert estimate.generation_calls == 6 * 3 * (1 + 2) == len([r for r in sent if "cand" in r["model"]])
    assert estimate.judge_calls == 6 * 3 * (1 + 2) * 2 == len([r for r in sent if "judge" in r["model"]])
    assert estimate.to_json()["calls"]["total"] == len(sent) == 162


def test_the_estimate_follows_trials_and_models(client, make_blueprint, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-123456")
    make_blueprint(VALID.replace("  - openai:gpt-4.1-mini\n", "  - openai:gpt-4.1-mini\n  - openai:gpt-4.1-nano\n"))
    base = {"blueprint": "capitals", "models_offered": ["openai:gpt-4.1-mini", "openai:gpt-4.1-nano"],
            "models": ["openai:gpt-4.1-mini", "openai:gpt-4.1-nano"]}

    as_authored = _figures(_estimate(client, "capitals", base))
    five = _figures(_estimate(client, "capitals", {**base, "trials": "5"}))
    changed = _figures(_estimate(client, "capitals", {**base, "trials": "5", "models": ["openai:gpt-4.1-mini"],
                                                      "add_models": "openai:gpt-4.1"}))

    # 1 prompt, 1 judged point, the site's 3 judges
    assert as_authored[1:3] == (2, 2 * 3)
    assert five[1:3] == (10, 10 * 3)
    assert changed[1:3] == (10, 10 * 3) and changed[3] != five[3]
    assert as_authored[0] == 2 + 6 and five[0] == 10 + 30


def test_the_page_shows_the_same_figure_as_the_estimate_view(client, make_blueprint):
    make_blueprint()

    page = client.get("/blueprints/capitals/").content.decode()
    form = client.get("/runs/form/capitals/", **htmx()).content.decode()
    fragment = _estimate(client, "capitals", {"blueprint": "capitals", "models_offered": ["openai:gpt-4.1-mini"],
                                              "models": ["openai:gpt-4.1-mini"]})

    assert 'hx-get="/runs/form/capitals/"' in page
    assert _figures(form) == _figures(fragment)
    assert 'hx-post="/runs/form/capitals/"' in form and "js/runform.js" in form


def test_missing_keys_are_one_line_per_provider_and_follow_the_boxes(client, make_blueprint, monkeypatch, settings):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    settings.EVALSITE_DEFAULT_JUDGES = ["openai:gpt-4.1-mini"]
    models = ["openai:gpt-4.1-mini", "openai:gpt-4.1-nano", "anthropic:claude-haiku-4-5"]
    make_blueprint(VALID.replace("  - openai:gpt-4.1-mini\n", "".join(f"  - {m}\n" for m in models)))
    base = {"blueprint": "capitals", "models_offered": models}

    both = _estimate(client, "capitals", {**base, "models": models})
    lines = [(v, unescape(t)) for v, t in re.findall(r'<li class="key-warning" data-variable="(\w+)">([^<]+)</li>', both)]
    assert [v for v, _ in lines] == ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"]
    assert "'openai:gpt-4.1-mini', 'openai:gpt-4.1-nano', judge 'openai:gpt-4.1-mini'" in lines[0][1]

    openai_only = _estimate(client, "capitals", {**base, "models": models[:2]})
    assert "ANTHROPIC_API_KEY" not in openai_only and openai_only.count('class="key-warning"') == 1


def test_a_refused_choice_is_said_in_the_estimate(client, make_blueprint):
    make_blueprint()

    fragment = _estimate(client, "capitals", {"blueprint": "capitals", "models_offered": ["openai:gpt-4.1-mini"],
                                              "models": ["openai:gpt-4.1-mini"], "judges": [],
                                              "judges_offered": ["x"], "trials": "500"})

    assert "Cannot run as the form stands" in fragment and "1 to 100" in fragment


@pytest.mark.django_db(transaction=True)
def test_past_the_threshold_a_start_needs_the_confirmation_even_without_javascript(client, settings, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings.EVALSITE_CONFIRM_CALLS = 5
    Blueprint.objects.create(slug="capitals", title="").save_revision(VALID)
    form = {"blueprint": "capitals", "revision": "1", "models_offered": ["openai:gpt-4.1-mini"],
            "models": ["openai:gpt-4.1-mini"], "trials": "2"}

    start = {**form, "start": "1"}
    refused = client.post("/runs/form/capitals/", start)
    assert refused.status_code == 200 and Run.objects.count() == 0
    text = unescape(refused.content.decode())
    assert "Not started: this run would make 8 calls" in text
    key = re.search(r'name="confirm" value="([^"]+)" id="id_confirm" required', text).group(1)
    assert 'name="trials" id="id_trials" min="1" max="100" value="2"' in text  # the form comes back as posted

    stale = client.post("/runs/form/capitals/", {**start, "trials": "3", "confirm": key})
    assert "Not started" in stale.content.decode() and Run.objects.count() == 0

    started = client.post("/runs/form/capitals/", {**start, "confirm": key})
    assert started.status_code == 302 and started["Location"].startswith("/runs/") and Run.objects.count() == 1

    # The old address of Start asks the same, whoever posts to it straight.
    direct = unescape(client.post("/runs/start", form, follow=True).content.decode())
    assert "Not started: this run would make 8 calls" in direct and Run.objects.count() == 1
    client.post("/runs/start", {**form, "confirm": key})
    assert Run.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_below_the_threshold_the_start_goes_straight_on(client, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    Blueprint.objects.create(slug="capitals", title="").save_revision(VALID)

    response = client.post("/runs/form/capitals/", {
        "blueprint": "capitals", "revision": "1", "models_offered": ["openai:gpt-4.1-mini"],
        "models": ["openai:gpt-4.1-mini"], "start": "1"}, follow=True)

    assert response.redirect_chain[-1][0].startswith("/runs/") and Run.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_apis_dry_run_answers_the_estimate_and_keeps_nothing(client):
    blueprints = Blueprint.objects.count()

    response = client.post("/api/runs", json.dumps({"blueprint": TRIALS, "dryRun": True, "trials": 3,
                                                    "fresh": True}), content_type="application/json")

    assert response.status_code == 200
    data = response.json()
    assert data["dryRun"] is True and data["calls"]["total"] == 162
    assert data["calls"]["generation"] == 54 and data["calls"]["judge"] == 108
    assert set(data) >= {"tokens", "costUsd", "unknown", "calls"}
    assert {u["id"] for u in data["unknown"] if u["kind"] == "price"} >= {"openai:cand-a", "openai:judge-one"}
    assert Blueprint.objects.count() == blueprints and Run.objects.count() == 0

    bad = client.post("/api/runs", json.dumps({"blueprint": TRIALS, "dryRun": "yes"}),
                      content_type="application/json")
    assert bad.status_code == 400
