"""In a real browser, a simulated conversation on the response page: the simulated user's turns marked, why it
stopped, a failing simulator's turn with its reason, and Every call's spending apart by purpose (issue 36)."""

import pytest
from playwright.sync_api import expect

from blueprints.models import Blueprint
from runs import start as run_start
from runs.models import Response
from tests.e2e.test_results_review import made_off_the_loop, watch_console
from tests.fakes.pytest_fixtures import fake_llm, fake_llm_server, fake_provider  # noqa: F401
from tests.runs.test_simulated_runs import BLUEPRINT, RULES

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]


def _make(fake):
    fake.script(RULES)
    blueprint = Blueprint.objects.create(slug="simulated", title="Simulated users")
    blueprint.save_revision(BLUEPRINT)
    run = run_start.start_run(blueprint)
    run.refresh_from_db()
    return run


def test_the_response_page_marks_simulated_turns_and_why_the_conversation_stopped(page, live_server, fake_provider,
                                                                                 screenshot):
    run = made_off_the_loop(_make, fake_provider)
    rows = {r.prompt_id: r for r in Response.objects.filter(run=run)}
    problems = watch_console(page)

    page.goto(f"{live_server.url}/runs/{run.pk}/responses/{rows['stops-on-point'].pk}/")
    simulated = page.locator("li.msg-user", has=page.locator(".badge-simulated"))
    expect(simulated).to_have_count(1)
    expect(simulated).to_contain_text("It is order 1234, please fix it")
    expect(page.locator("li.msg-user", has_text="my order broke").locator(".badge")).to_have_text("authored")
    expect(page.locator(".stop-note")).to_have_text("stopped: the stop point was met by assistant turn 2")
    page.locator("#calls-heading").scroll_into_view_if_needed()
    page.locator("details", has=page.locator("[hx-get$='/calls']")).locator("summary").first.click()
    expect(page.locator(".calls-spent-user")).to_contain_text("Simulated user: 1 call")
    expect(page.locator(".calls-spent-candidate")).to_contain_text("Candidate: 2 calls")
    screenshot(page, "simulated-user")

    page.goto(f"{live_server.url}/runs/{run.pk}/responses/{rows['simulator-fails'].pk}/")
    pending = page.locator("li.msg-user.msg-pending")
    expect(pending.locator(".badge-simulated")).to_have_count(1)
    expect(pending).to_contain_text("the simulated user (openai:sim-user-empty) failed")
    expect(page.locator("#rendered")).to_contain_text("Nothing was generated")
    assert problems == []
