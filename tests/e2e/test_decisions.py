"""A person on the compare page of a "can't tell" run sees what would flip each verdict and what would settle it,
starts the follow-up with one click, and lands on the follow-up's run page, which names its run and its verdict."""

import pytest
from playwright.sync_api import expect

from runs.models import Run
from tests.e2e.test_results_review import made_off_the_loop, watch_console
from tests.fakes.pytest_fixtures import fake_llm, fake_llm_server, fake_provider  # noqa: F401
from tests.runs.test_followup import A, B, _original, priced  # noqa: F401

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]


def test_one_click_settles_a_cant_tell(page, live_server, fake_provider, priced, screenshot):  # noqa: F811
    run = made_off_the_loop(_original, fake_provider)
    problems = watch_console(page)
    page.goto(f"{live_server.url}/runs/{run.pk}/compare")
    expect(page.locator(".robustness-list")).to_contain_text(f"can't tell {A} from {B}")
    suggestion = page.locator(".followup-suggestion")
    expect(suggestion).to_contain_text("To settle it, ask 2 prompts where the two disagree most again")
    suggestion.get_by_label("Budget (US$)").fill("")
    screenshot(page, "compare-followup")
    suggestion.get_by_role("button", name="Start the follow-up").click()
    page.wait_for_load_state()
    follow = Run.objects.exclude(pk=run.pk).get()
    expect(page).to_have_url(f"{live_server.url}/runs/{follow.pk}/")
    notice = page.locator("section.followup")
    expect(notice).to_contain_text(f"Follow-up of run {run.pk}")
    expect(notice.get_by_role("link", name=f"run {run.pk}")).to_have_attribute("href", f"/runs/{run.pk}/")
    expect(notice.locator(".followup-verdict")).to_contain_text(f"{A} better")
    screenshot(page, "followup-run")
    assert problems == []


def test_one_click_settles_a_cant_tell_between_two_runs(page, live_server, fake_provider, screenshot):
    """The compare page between a run and its base offers a follow-up for the variant it cannot tell apart; one
    click starts the two linked runs, and each run page names the other and the verdict."""
    from tests.runs.test_followup_across import V, _runs

    run, base = made_off_the_loop(_runs, fake_provider)
    problems = watch_console(page)
    page.goto(f"{live_server.url}/runs/{run.pk}/compare?with={base.pk}")
    suggestion = page.locator(".followup-suggestion")
    expect(suggestion).to_contain_text(f"To settle it, ask {V} 2 prompts where run {run.pk} and run {base.pk} "
                                       "disagree most again")
    suggestion.get_by_label("Budget (US$)").fill("")
    screenshot(page, "compare-across-followup")
    suggestion.get_by_role("button", name="Start the follow-up").click()
    page.wait_for_load_state()
    mine = Run.objects.get(options__followupOf=run.pk)
    theirs = Run.objects.get(options__followupOf=base.pk)
    expect(page).to_have_url(f"{live_server.url}/runs/{mine.pk}/")
    notice = page.locator("section.followup")
    expect(notice).to_contain_text(f"Follow-up of run {run.pk}")
    expect(notice.locator("a.followup-partner")).to_have_attribute("href", f"/runs/{theirs.pk}/")
    expect(notice.locator(".followup-verdict")).to_contain_text(f"{V} better in run {run.pk}")
    page.goto(f"{live_server.url}/runs/{base.pk}/")
    expect(page.locator("section.followup .followup-item")).to_contain_text(
        f"Run {theirs.pk}: {V} in run {run.pk} against run {base.pk}")
    screenshot(page, "across-followup-listed")
    assert problems == []
