"""Issue #33, case 4: viewing a blueprint cannot burn minutes of CPU. The estimate's cache look-up hashes a
conversation once, not once per variant and trial (one key recipe: the router's); it stops at its time limit
and then says "at least" so many are cached; every page has a time limit (EVALSITE_PAGE_TIMEOUT_S)."""

import hashlib
import json
import random
import re
import time

import pytest

from blueprints.models import Blueprint
from runs import start as run_start
from tests.fakes.pytest_fixtures import fake_llm, fake_llm_server, fake_provider  # noqa: F401
from tests.web.conftest import htmx

BIG = 1_000_000  # characters of one prompt
MODELS = 300
TRIALS = 3


def _reference_key(identity, messages, *, temperature, max_tokens, trial=0, repeat=0):
    """The key as it was always computed: a SHA-256 over one JSON text with sorted keys."""
    payload = {"v": 1, "target": identity,
               "messages": [{"role": m["role"], "content": m.get("content")} for m in messages],
               "temperature": None if temperature is None else float(temperature), "max_tokens": max_tokens}
    if trial:
        payload["trial"] = trial
    if repeat:
        payload["repeat"] = repeat
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_the_key_hashed_in_two_halves_is_the_key_it_always_was():
    from runs.engine.providers.cache import cache_key, key_from_head, key_head

    rng = random.Random(33)
    alphabet = "ab \"\\\n\u00e9\u4e2d\U0001f600{}:,"
    for _ in range(200):
        messages = [{"role": rng.choice(["system", "user", "assistant"]),
                     "content": "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30)))}
                    for _ in range(rng.randrange(0, 4))]
        identity = rng.choice([{"provider": "openai", "model": "m", "url": "https://x/v1"},
                               {"custom": "local:x", "parameters": {"b": 1, "a": [1, "z"]}, "headers": []}])
        options = dict(temperature=rng.choice([None, 0, 0.0, 0.7, 1]), max_tokens=rng.choice([None, 500, 1500]),
                       trial=rng.choice([0, 0, 3]), repeat=rng.choice([0, 2]))
        expected = _reference_key(identity, messages, **options)
        assert cache_key(identity, messages, **options) == expected
        head = key_head(messages, max_tokens=options["max_tokens"])
        again = {k: v for k, v in options.items() if k != "max_tokens"}
        assert key_from_head(head, identity, **again) == expected
        assert key_from_head(head, identity, **again) == expected  # the head is copied, never used up


def _big_blueprint(db_slug="big"):
    models = "\n".join(f"  - openai:m{i}" for i in range(MODELS))
    text = (f"title: Big\nmodels:\n{models}\n---\n- id: big\n  prompt: \"{'x' * BIG}\"\n  trials: {TRIALS}\n"
            f"  should:\n    - $contains: x\n")
    blueprint = Blueprint.objects.create(slug=db_slug, title="")
    blueprint.save_revision(text)
    return blueprint


def _cached(fragment):
    found = re.search(r"(\d+) answered from the response cache", fragment)
    return int(found.group(1)) if found else 0


@pytest.mark.django_db
def test_a_huge_prompt_times_many_variants_and_trials_is_estimated_in_a_moment(client, monkeypatch, settings,
                                                                               tmp_path):
    # 1 MB x 300 variants x 3 trials: 900 look-ups. Each hashed the whole conversation again (about 10 ms
    # each here, 9+ s a view); now it is hashed once, and each look-up finishes the hash with its small parts.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-123456")
    settings.EVALSITE_DATA_DIR = tmp_path
    settings.EVALSITE_ESTIMATE_LOOKUP_S = 60.0  # not cut short: the look-up itself must be quick
    _big_blueprint()

    page_started = time.perf_counter()
    page = client.get("/blueprints/big/")
    page_s = time.perf_counter() - page_started
    started = time.perf_counter()
    form = client.get("/runs/form/big/", **htmx())
    form_s = time.perf_counter() - started

    assert page.status_code == 200 and form.status_code == 200
    text = form.content.decode()
    assert re.search(r'class="estimate-responses">900<', text)
    assert "estimate-partial-cache" not in text  # every response was looked up
    assert 'hx-get="/runs/form/big/"' in page.content.decode()  # the page does not wait for the estimate
    assert "estimate-calls" not in page.content.decode()
    assert form_s < 4.0, f"the run form's estimate took {form_s:.1f} s"
    assert page_s < 4.0, f"the blueprint page took {page_s:.1f} s"


@pytest.mark.django_db
def test_past_its_time_limit_the_look_up_stops_and_says_at_least(client, monkeypatch, settings, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-123456")
    settings.EVALSITE_DATA_DIR = tmp_path
    settings.EVALSITE_ESTIMATE_LOOKUP_S = 0.0
    _big_blueprint()

    form = client.get("/runs/form/big/", **htmx()).content.decode()

    assert 'class="estimate-cached-at-least">0<' in form
    assert "900 responses not looked up are counted as calls" in form
    assert re.search(r'class="estimate-calls">900<', form)  # counted as sent: the most it can be


@pytest.mark.django_db(transaction=True)
def test_answers_in_the_cache_are_still_found_with_the_routers_keys(client, fake_provider, settings):
    fake_provider.script([{"model": "cand", "match": "", "reply": "Blue."}])
    text = ("title: Cached\nmodels: [openai:cand-a, openai:cand-b]\ntemperatures: [0, 0.5]\n---\n"
            "- id: colour\n  prompt: Name a colour.\n  trials: 2\n  should:\n    - $contains: e\n"
            "- id: chat\n  messages:\n    - user: Hello.\n    - assistant: null\n    - user: Again?\n"
            "  should:\n    - $contains: e\n")
    blueprint = Blueprint.objects.create(slug="cached", title="")
    blueprint.save_revision(text)
    before = run_start.prepare(blueprint, run_start.RunRequest())
    run = run_start.start_run(blueprint)
    run.refresh_from_db()
    assert run.status == "done"

    form = client.get("/runs/form/cached/", **htmx()).content.decode()

    # 2 models x 2 temperatures: colour 2 trials x 1 turn, chat 1 trial x 2 turns = 16 generated turns
    assert before.estimate.cached_calls == 0 and before.estimate.generation_calls == 16
    assert _cached(form) == 16 and re.search(r'class="estimate-calls">0<', form)


@pytest.mark.django_db(transaction=True)
def test_every_page_has_a_time_limit(client, fake_provider, settings):
    fake_provider.script([{"model": "cand", "match": "", "reply": "Blue."}])
    blueprint = Blueprint.objects.create(slug="slow", title="")
    blueprint.save_revision("models: [openai:cand-a]\n---\n- prompt: Name a colour.\n  should:\n    - $contains: e\n")
    run = run_start.start_run(blueprint)
    settings.EVALSITE_PAGE_TIMEOUT_S = 0.0  # every request is out of time at once

    page = client.get(f"/runs/{run.pk}/")
    api = client.get(f"/api/runs/{run.pk}/results")
    form = client.get("/runs/form/slow/", **htmx())

    assert page.status_code == 503 and "EVALSITE_PAGE_TIMEOUT_S" in page.content.decode()
    assert "took too long" in page.content.decode()
    assert api.status_code == 503 and "EVALSITE_PAGE_TIMEOUT_S" in api.json()["error"]
    # The estimate never fails a page: out of time, it stops looking up the cache and says so.
    assert form.status_code == 200 and "estimate-partial-cache" in form.content.decode()
