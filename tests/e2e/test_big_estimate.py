"""Issue #33, case 4, in the browser: a blueprint with a 1 MB prompt and 300 models x 3 trials opens at once,
and its run form's estimate (900 responses looked up in the response cache) follows within seconds."""

import time

import pytest
from playwright.sync_api import expect

from blueprints.models import Blueprint

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_huge_prompt_times_many_variants_opens_at_once_and_its_estimate_follows(page, live_server, monkeypatch,
                                                                                  settings, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-123456")
    settings.EVALSITE_DATA_DIR = tmp_path
    settings.EVALSITE_ESTIMATE_LOOKUP_S = 60.0  # the look-up is not cut short: it must be quick by itself
    models = "\n".join(f"  - openai:m{i}" for i in range(300))
    text = (f"title: Big\nmodels:\n{models}\n---\n- id: big\n  prompt: \"{'x' * 1_000_000}\"\n  trials: 3\n"
            f"  should:\n    - $contains: x\n")
    Blueprint.objects.create(slug="big", title="").save_revision(text)

    started = time.perf_counter()
    page.goto(f"{live_server.url}/blueprints/big/", wait_until="domcontentloaded")
    opened = time.perf_counter() - started
    expect(page.locator("#run-estimate .estimate-responses")).to_have_text("900", timeout=6_000)
    estimated = time.perf_counter() - started

    assert opened < 4.0, f"the blueprint page took {opened:.1f} s"
    assert estimated < 6.0, f"the estimate took {estimated:.1f} s"
    expect(page.locator("#run-estimate .estimate-partial-cache")).to_have_count(0)
