"""A reviewer opens a finished run, reads a judge's reflection, switches render_as views, overrides a point
and sees the score change; the pages log no console error."""

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from playwright.sync_api import expect

from runs.models import Response
from tests.web.run_support import fake_llm, fake_llm_server, fake_provider, make_run  # noqa: F401

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]


def made_off_the_loop(function, *args, **kwargs):
    """Playwright's sync API keeps an event loop running in the test thread; a run (which uses asyncio)
    is made in another thread."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(function, *args, **kwargs).result()


def watch_console(page):
    problems = []

    def on_console(message):
        # The site has no favicon yet; the browser's own request for it is not the page's doing.
        if message.type == "error" and not message.location.get("url", "").endswith("/favicon.ico"):
            problems.append(f"{message.text} ({message.location.get('url')})")

    page.on("console", on_console)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("response", lambda response: problems.append(f"{response.status} {response.url}")
            if response.status >= 400 else None)
    return problems


def test_a_reviewer_reads_switches_overrides_and_sees_the_score_change(page, live_server, fake_provider,
                                                                        screenshot):
    run = made_off_the_loop(make_run, fake_provider)
    problems = watch_console(page)
    page.set_viewport_size({"width": 1400, "height": 1000})

    # From the home page to the run through ordinary links.
    page.goto(live_server.url + "/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs").click()
    page.get_by_role("link", name=f"Run {run.pk}").click()
    expect(page.get_by_role("heading", name=re.compile(f"Run {run.pk}"))).to_be_visible()
    expect(page.get_by_role("status")).to_contain_text("Finished")
    heatmap = page.locator("table.heatmap")
    expect(heatmap.locator("tbody tr")).to_have_count(3)
    screenshot(page, "results-run-page")
    page.locator("#heatmap-heading").scroll_into_view_if_needed()
    screenshot(page, "results-heatmap")

    # The cell of the capital prompt for the good model: 0.90, with the judges' disagreement flagged.
    row = heatmap.locator("tbody tr", has=page.get_by_role("link", name="capital"))
    cell = row.locator("td.cell").first
    expect(cell).to_contain_text("0.90")
    expect(cell).to_contain_text("judges disagree")
    cell.get_by_role("link").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("capital")
    summary = page.locator("#score-summary")
    expect(summary).to_contain_text("0.90")

    # A judge's reflection, then the raw answer one click away.
    point = page.locator("article.point-card", has_text="Mentions the Seine river.")
    expect(point).to_contain_text("judges disagree")
    verdict = point.locator("li.verdict-item", has_text="judge-b")
    reflection = verdict.locator(".reflection")
    expect(reflection).to_be_hidden()
    verdict.locator("summary").first.click()
    expect(reflection).to_have_text("The river is named only in passing.")
    verdict.get_by_text("Raw judge answer").click()
    expect(verdict.locator(".raw-answer pre")).to_contain_text("<classification>CLASS_UNMET</classification>")
    screenshot(page, "results-response-reflection")

    # render_as: markdown by default; plain text shows the source.
    rendered = page.locator("#rendered")
    expect(rendered.locator(".response-markdown strong").first).to_have_text("Paris")
    rendered.get_by_role("link", name="Plain text", exact=True).click()
    expect(rendered.locator("pre.response-text").first).to_contain_text("**Paris** is the capital")
    expect(page).to_have_url(re.compile(r"\?as=plaintext"))
    rendered.get_by_role("link", name="Markdown").click()
    expect(rendered.locator(".response-markdown strong").first).to_have_text("Paris")

    # Override the disputed point: the response's score goes from 0.90 to 1.00, the judges' verdict stays.
    point.get_by_text("Override this score").click()
    point.get_by_label("Score").fill("1")
    point.get_by_label("Reason").fill("The Seine is named; that is what the point asks.")
    point.get_by_label("Your name").fill("Ada")
    point.get_by_role("button", name="Save override").click()
    summary = page.locator("#score-summary")
    expect(summary.locator(".score-big")).to_have_text("1.00")
    expect(summary).to_contain_text("a reviewer's override applies")
    expect(summary).to_contain_text("0.90 before overrides")
    point = page.locator("article.point-card", has_text="Mentions the Seine river.")
    expect(point.locator(".override-note")).to_contain_text("The judges' score was 0.50")
    expect(point.locator(".override-saved")).to_be_focused()
    expect(page.locator(".calc-final")).to_contain_text("1.00")
    screenshot(page, "results-response-override")

    # The HTML prompt: rendered in a sandboxed frame, its source one click away.
    page_prompt = Response.objects.get(run=run, prompt_id="page", variant_id="openai:cand-good[temp:0]")
    page.goto(f"{live_server.url}/runs/{run.pk}/responses/{page_prompt.pk}/")
    frame = page.locator("iframe.html-frame").first
    expect(frame).to_have_attribute("sandbox", "")
    expect(page.frame_locator("iframe.html-frame").first.locator("h1")).to_have_text("Hello")
    page.locator("#rendered").get_by_role("link", name="Plain text", exact=True).click()
    expect(page.locator("#rendered pre.response-text").first).to_contain_text("<h1>Hello</h1>")
    screenshot(page, "results-response-html-source")

    # The run page shows the new score too.
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    expect(page.locator("table.heatmap tbody tr", has=page.get_by_role("link", name="capital"))
           .locator("td.cell").first).to_contain_text("1.00")

    assert problems == []
