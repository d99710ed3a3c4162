"""A reviewer judges pairs in Chromium with the keyboard alone: a / b / t choose, r goes to the reason, Enter
submits, n brings the next pair; the models are named only after the choice, and the ratings follow."""

import re

import pytest
from playwright.sync_api import expect

from runs.models import PairJudgement
from tests.e2e.test_results_review import made_off_the_loop, watch_console
from tests.web.test_pairs import make_pairs_run
from tests.web.run_support import fake_llm, fake_llm_server, fake_provider  # noqa: F401

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]


def test_a_reviewer_judges_two_pairs_by_keyboard_and_sees_the_ratings(page, live_server, screenshot):
    run = made_off_the_loop(make_pairs_run)
    problems = watch_console(page)

    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.get_by_role("link", name="Pairs", exact=True).click()
    page.wait_for_load_state()
    pair = page.locator("#pair")
    expect(pair.get_by_role("heading", name="Response A")).to_be_visible()
    expect(pair.get_by_role("heading", name="Response B")).to_be_visible()
    expect(pair).not_to_contain_text("fixtures:")  # blind: no model named before the choice
    expect(page.locator("#ratings")).to_contain_text("No judgements yet")

    page.get_by_label("Your name").fill("Ada")
    page.locator("h1").click()  # out of the field: keys go to the page
    winner = page.locator('input[name="winner"]')
    page.keyboard.press("a")
    expect(winner.and_(page.locator('[value="left"]'))).to_be_checked()
    page.keyboard.press("t")
    expect(winner.and_(page.locator('[value="tie"]'))).to_be_checked()
    page.keyboard.press("b")
    expect(winner.and_(page.locator('[value="right"]'))).to_be_checked()
    page.keyboard.press("r")
    reason = page.locator('input[name="reason"]')
    expect(reason).to_be_focused()
    page.keyboard.type("B is shorter <b>and</b> right")
    screenshot(page, "pairs-blind")
    page.keyboard.press("Enter")

    expect(pair).to_contain_text("You chose B.")
    expect(pair).to_contain_text("fixtures:")  # now the models are named
    expect(pair).to_contain_text("B is shorter <b>and</b> right")  # the reason as text
    expect(page.locator("#ratings > .table-scroll tbody tr")).to_have_count(2)  # the raw table
    expect(page.locator("#style-ratings .ratings-table tbody tr")).to_have_count(2)  # controlled for style
    expect(page.locator("#style-ratings .style-coefficients tbody tr")).to_have_count(4)
    screenshot(page, "pairs-revealed")

    page.keyboard.press("n")
    expect(pair.get_by_role("heading", name="Response A")).to_be_visible()
    expect(page.get_by_label("Your name")).to_have_value("Ada")  # remembered
    page.locator("h1").click()
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    expect(pair).to_contain_text("You chose A.")
    expect(page.locator("#ratings")).to_contain_text(re.compile(r"2 judgements"))

    judgements = list(PairJudgement.objects.order_by("created_at").values_list("winner", "who", "reason"))
    assert judgements == [("right", "Ada", "B is shorter <b>and</b> right"), ("left", "Ada", "")]
    assert problems == []


def test_an_llm_judge_is_asked_from_the_page_and_its_position_bias_shown(page, live_server, fake_provider,
                                                                         screenshot):
    fake_provider.script([{"model": "first-fan", "match": r"<RESPONSE_1>",
                           "reply": "<reflection>The first reads better.</reflection><choice>1</choice>"}])
    run = made_off_the_loop(make_pairs_run)
    problems = watch_console(page)

    page.goto(f"{live_server.url}/runs/{run.pk}/pairs")
    judge = page.locator("#llm-judge")
    judge.get_by_label("Judge model").fill("openai:first-fan")
    judge.get_by_label("Pairs to ask about").fill("3")
    judge.get_by_role("button", name="Ask the judge").click()

    expect(page.locator("#llm-judge")).to_contain_text(
        "Asked both ways round on 3 pairs: consistent on 0% (0 of 3)", timeout=15_000)
    expect(page.locator("#llm-judge")).to_contain_text("position bias: 3 of 3")
    expect(page.locator("#ratings")).to_contain_text("No judgements yet")  # people's ratings stay theirs
    screenshot(page, "pairs-llm-judge")
    assert PairJudgement.objects.filter(who="judge:openai:first-fan").count() == 6
    assert problems == []
