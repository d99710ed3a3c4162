"""In a real browser, a native tool loop's trajectory on the response page: steps in order, arguments and
results folded until opened, failures marked with their reason (issue 36)."""

import pytest
from playwright.sync_api import expect

from blueprints.models import Blueprint
from runs import start as run_start
from runs.models import Response
from tests.e2e.test_results_review import made_off_the_loop, watch_console
from tests.fakes.pytest_fixtures import FAKE_KEY, fake_llm, fake_llm_server, fake_provider  # noqa: F401

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]

BLUEPRINT = """title: Trajectory
models: [anthropic:agent-a]
toolUse: {mode: native, maxSteps: 4}
tools:
  - name: search
    schema: {type: object, properties: {query: {type: string}}, required: [query]}
    mocks:
      - when: {query: {matches: '^Article'}}
        result: [{id: '42', title: Article 2}]
  - name: retrieve
    schema: {type: object, properties: {docId: {type: string}}, required: [docId]}
    mocks:
      - when: {docId: '42'}
        result: {title: Article 2, body: '<img src=x onerror=alert(1)>'}
---
- id: good
  prompt: Find Article 2 and quote its title.
  should:
    - $tool_call_order: [search, retrieve]
- id: broken
  prompt: Look up document 99.
  should:
    - $tool_called: retrieve
- id: endless
  prompt: Search until you are sure.
  should:
    - $tool_called: search
"""


def _make(fake):
    fake.script([
        {"match": "Find Article 2", "steps": [[{"name": "search", "arguments": {"query": "Article 2"}}],
                                              [{"name": "retrieve", "arguments": {"docId": "42"}}]],
         "reply": 'The title is "Article 2".'},
        {"match": "document 99", "tool_calls": [{"name": "retrieve", "arguments": {"docId": "99"}}], "reply": "?"},
        {"match": "until you are sure", "steps": [[{"name": "search", "arguments": {"query": "Article"}}]] * 6,
         "reply": "?"},
    ])
    blueprint = Blueprint.objects.create(slug="trajectory", title="Trajectory")
    blueprint.save_revision(BLUEPRINT)
    run = run_start.start_run(blueprint)
    run.refresh_from_db()
    return run


def test_the_response_page_shows_the_trajectory_folded_with_failures_marked(page, live_server, fake_provider,
                                                                            monkeypatch, screenshot):
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_provider.base_url)
    run = made_off_the_loop(_make, fake_provider)
    rows = {r.prompt_id: r for r in Response.objects.filter(run=run)}
    problems = watch_console(page)
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    page.goto(f"{live_server.url}/runs/{run.pk}/responses/{rows['good'].pk}/")
    steps = page.locator("li.msg-tool")
    expect(steps).to_have_count(2)
    expect(steps.nth(0)).to_contain_text("search")
    expect(steps.nth(1)).to_contain_text("retrieve")
    expect(steps.nth(1)).to_contain_text("step 2, answered by mock 1")
    expect(page.locator("li.msg-tool.tool-failed")).to_have_count(0)
    result = steps.nth(1).locator("details", has_text="Result the model was sent")
    expect(result.locator("pre")).not_to_be_visible()  # folded
    result.locator("summary").click()
    expect(result.locator("pre")).to_be_visible()
    expect(result.locator("pre")).to_contain_text("<img src=x onerror=alert(1)>")  # shown as text
    calls = page.locator("li.tool-call")
    expect(calls).to_have_count(2)
    calls.nth(0).locator("summary").click()
    expect(calls.nth(0).locator("pre")).to_contain_text('"query": "Article 2"')
    expect(page.locator(".badge-tools").last).to_have_text("tools: native")
    screenshot(page, "tool-trajectory")

    page.goto(f"{live_server.url}/runs/{run.pk}/responses/{rows['broken'].pk}/")
    failed = page.locator("li.msg-tool.tool-failed")
    expect(failed).to_have_count(1)
    expect(failed).to_contain_text("failed: no mock answered")
    expect(failed).to_contain_text("no mock of retrieve matches the arguments")
    expect(page.locator("#rendered")).to_contain_text("Nothing was generated")

    page.goto(f"{live_server.url}/runs/{run.pk}/responses/{rows['endless'].pk}/")
    expect(page.locator("li.msg-tool")).to_have_count(3)  # steps 1-3 answered; the 4th call was not
    expect(page.locator("li.tool-call.tool-failed")).to_have_count(1)
    expect(page.locator("li.tool-call.tool-failed")).to_contain_text("not answered: the step limit was reached")
    expect(page.locator("#rendered")).to_contain_text("toolUse.maxSteps allows 4 model calls in a turn")
    assert dialogs == [] and problems == []


def _make_imported(fake):
    """An AI Eval project's suite (its prompt file alongside) with tool_mocks, run on the native loop."""
    from tests.engine.test_imported_agents import AIEVAL, AIEVAL_SCRIPT, WEATHER_PROMPT

    fake.script(AIEVAL_SCRIPT)
    blueprint = Blueprint.objects.create(slug="weather-loop", title="weather-loop")
    blueprint.save_revision(AIEVAL, files={"../prompts/weather.yaml": WEATHER_PROMPT})
    assert blueprint.current_revision.dialect == "aieval" and blueprint.current_revision.is_valid
    run = run_start.start_run(blueprint, models=["openai:cand"])
    run.refresh_from_db()
    return run


def test_an_imported_ai_eval_case_shows_its_mocked_steps_and_its_recorded_calls(page, live_server, fake_provider,
                                                                               screenshot):
    run = made_off_the_loop(_make_imported, fake_provider)
    rows = {r.prompt_id: r for r in Response.objects.filter(run=run)}
    problems = watch_console(page)

    page.goto(f"{live_server.url}/runs/{run.pk}/responses/{rows['weather'].pk}/")
    steps = page.locator("li.msg-tool")
    expect(steps).to_have_count(1)
    expect(steps.nth(0)).to_contain_text("get_weather")
    expect(steps.nth(0)).to_contain_text("answered by mock 1")
    result = steps.nth(0).locator("details", has_text="Result the model was sent")
    result.locator("summary").click()
    expect(result.locator("pre")).to_contain_text('"temp_c": 18')
    screenshot(page, "imported-tool-trajectory")

    # A mock-less tool called in a mocked case: the step fails with its reason, and nothing is scored.
    page.goto(f"{live_server.url}/runs/{run.pk}/responses/{rows['unmatched'].pk}/")
    failed = page.locator("li.msg-tool.tool-failed")
    expect(failed).to_have_count(1)
    expect(failed).to_contain_text("search has no mocks and no default")

    # A case without tool_mocks: the call is recorded, shown as such, never marked as a failure.
    page.goto(f"{live_server.url}/runs/{run.pk}/responses/{rows['recorded'].pk}/")
    expect(page.locator("li.tool-call")).to_have_count(1)
    expect(page.locator("li.tool-call .tool-recorded")).to_contain_text("recorded, not answered")
    expect(page.locator("li.tool-call.tool-failed")).to_have_count(0)
    assert problems == []
