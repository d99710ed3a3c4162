"""In a real browser, hostile model output runs nothing and fetches nothing, and the pages stay usable."""

import time

import pytest
from playwright.sync_api import expect

from runs.models import Response
from tests.e2e.test_results_review import made_off_the_loop
from tests.web.run_support import EVIL, fake_llm, fake_llm_server, fake_provider, make_hostile_run  # noqa: F401

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]


def test_hostile_output_runs_nothing_fetches_nothing_and_the_pages_stay_usable(page, live_server, fake_provider,
                                                                               screenshot):
    run = made_off_the_loop(make_hostile_run, fake_provider)
    responses = {r.prompt_id: r for r in Response.objects.filter(run=run)}
    dialogs, outside = [], []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.on("request", lambda request: outside.append(request.url)
            if not request.url.startswith((live_server.url, "data:", "about:")) else None)
    page.set_viewport_size({"width": 1300, "height": 900})

    page.goto(f"{live_server.url}/runs/{run.pk}/responses/{responses['md'].pk}/")
    rendered = page.locator("#rendered .response-markdown")
    expect(rendered).to_contain_text("<script>window.pwned = 1; alert(1)</script>")  # visible as text
    expect(rendered.get_by_role("link", name="click me")).to_have_count(0)  # a javascript: link is no link
    page.locator("#rendered").get_by_role("link", name="Plain text", exact=True).click()
    expect(page.locator("#rendered pre.response-text")).to_contain_text("onerror=")
    assert page.evaluate("typeof window.pwned") == "undefined"

    page.goto(f"{live_server.url}/runs/{run.pk}/responses/{responses['web'].pk}/")
    frame = page.frame_locator("iframe.html-frame")
    expect(frame.locator("h1")).to_have_text("hello")
    frame.locator("p", has_text="x").last.hover()  # the onmouseover the model wrote is gone
    frame.get_by_text("click").click()  # its javascript: link is gone too
    screenshot(page, "results-hostile-html")
    page.get_by_text("Override this score").click()
    expect(page.get_by_role("spinbutton", name="Score")).to_be_visible()  # the page still works

    page.goto(f"{live_server.url}/runs/{run.pk}/responses/{responses['huge'].pk}/")
    expect(page.get_by_text("Showing the first 50,000 of 1,048,576 characters.")).to_be_visible()
    started = time.monotonic()
    page.locator("#rendered").get_by_role("link", name="Plain text", exact=True).click()
    expect(page.locator("#rendered pre.response-text")).to_be_visible()
    assert time.monotonic() - started < 10  # still responsive (a generous bound, not a benchmark)

    page.goto(f"{live_server.url}/runs/{run.pk}/")
    expect(page.locator("table.heatmap tbody tr")).to_have_count(3)
    page.wait_for_timeout(300)  # give anything that would fire a chance to
    assert page.evaluate("typeof window.pwned") == "undefined"
    assert dialogs == []
    assert [url for url in outside if EVIL in url] == [] and outside == []
