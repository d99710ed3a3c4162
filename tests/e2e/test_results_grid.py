"""A reviewer uses the results grid in Chromium: filters to failures, searches a word, steps through the
responses with the keyboard, opens one in place, opens every reflection of a response, and watches cells
fill while a run works against the fake server. Screenshots for docs/results.md when E2E_SCREENSHOTS is set."""

import re
import threading

import pytest
from playwright.sync_api import expect

from runs import start as run_start
from runs import work as run_work
from runs.models import Response
from tests.e2e.test_results_review import made_off_the_loop, watch_console
from tests.web.run_support import fake_llm, fake_llm_server, fake_provider, make_blueprint, make_run  # noqa: F401
from tests.web.run_support import script

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning"),
]


def test_filter_search_step_open_and_read_every_reflection(page, live_server, fake_provider, screenshot):
    run = made_off_the_loop(make_run, fake_provider)
    problems = watch_console(page)

    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.get_by_role("link", name="Results grid").click()
    page.wait_for_load_state()  # the page's script applies a choice at once; before it runs, "Apply" does
    grid = page.locator("table.grid")
    expect(grid.locator("tbody tr")).to_have_count(3)
    expect(grid).to_contain_text("I think it is Lyon.")  # the start of each response, in its cell
    screenshot(page, "results-grid")

    # Failures only: the URL says so (a view to bookmark), the bad model's cells stay lit.
    page.get_by_label("Show").select_option("failures")
    expect(page).to_have_url(re.compile(r"filter=failures"))
    expect(page.locator("td.gcell:not(.dim)").first).to_be_visible()
    lit = page.locator("td.gcell:not(.dim)")
    expect(lit.filter(has_text="I think it is Lyon.")).to_have_count(1)
    expect(lit.filter(has_text="Walk everywhere")).to_have_count(0)
    screenshot(page, "results-grid-failures")

    # A word: only the prompts where it appears (in a prompt, a response or what a judge said).
    page.get_by_label("Show").select_option("all")
    page.get_by_label("Search").fill("taxi")
    page.get_by_label("Search").press("Enter")
    expect(page).to_have_url(re.compile(r"q=taxi"))
    expect(grid.locator("tbody tr")).to_have_count(1)
    expect(grid.locator("tbody tr")).to_contain_text("rome")

    # The keyboard: j to the first response, o opens it in place with its whole text and judges' words.
    page.get_by_label("Search").fill("")
    page.get_by_label("Search").press("Enter")
    expect(grid.locator("tbody tr")).to_have_count(3)
    page.locator("h1").click()  # out of the search field: keys go to the grid
    page.keyboard.press("j")
    expect(page.locator("td.gcell.current")).to_have_count(1)
    first = page.locator("td.gcell.current").get_attribute("id")
    page.keyboard.press("j")
    expect(page.locator("td.gcell.current")).not_to_have_id(first)
    page.keyboard.press("k")
    expect(page.locator("td.gcell.current")).to_have_id(first)
    page.keyboard.press("n")  # the next one below the threshold
    current = page.locator("td.gcell.current")
    expect(current).to_have_class(re.compile(r"\bbelow\b"))
    page.keyboard.press("o")
    expect(current.locator(".cell-detail")).to_be_visible()
    expect(current.locator(".cell-detail")).to_contain_text("judge")
    screenshot(page, "results-grid-open-cell")
    page.keyboard.press("Escape")
    expect(current.locator("details")).not_to_have_attribute("open", "")

    # Enter opens the response page; "Open all reflections" opens every judge's reflection there.
    current.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_contain_text("×")
    page.get_by_role("button", name="Open all reflections").click()
    reflections = page.locator(".verdicts details:not(.raw-answer)")
    assert reflections.count() > 0
    for i in range(reflections.count()):
        expect(reflections.nth(i)).to_have_attribute("open", "")
    page.keyboard.press("Escape")  # back to the grid
    expect(page).to_have_url(re.compile(r"/results"))
    assert problems == []


def test_cells_fill_in_while_a_run_works(page, live_server, fake_provider, screenshot):
    def start():
        script(fake_provider, [{"model": "cand-slow-latency-1500ms", "match": ".", "reply": "Slowly: Paris."}])
        blueprint = make_blueprint()
        return run_start.start_run(blueprint, models=["openai:cand-good", "openai:cand-slow-latency-1500ms"],
                                   judges=["openai:judge-a"], fresh=True, enqueue=False)

    run = made_off_the_loop(start)
    problems = watch_console(page)
    page.goto(f"{live_server.url}/runs/{run.pk}/results")
    expect(page.locator("#grid-live")).to_contain_text("0 of 6")
    expect(page.locator("td.gcell.cell-pending")).to_have_count(6)
    slow_line = page.locator("#model-stats tr", has_text="cand-slow")
    waiting, scored = slow_line.locator("td").nth(6), slow_line.locator("td").nth(3)  # the table's columns
    expect(waiting).to_have_text("3")

    ids = list(Response.objects.filter(run=run).values_list("pk", flat=True))
    worker = threading.Thread(target=run_work.execute_chunk, args=(run.pk, ids))
    worker.start()
    try:
        # The fast model's cells are scored while the slow one's are still going: filled by the poll.
        expect(page.locator("td.gcell", has_text="Walk everywhere")).to_have_count(1, timeout=20_000)
        screenshot(page, "results-grid-live")
    finally:
        worker.join(60)
    expect(page.locator("td.gcell.cell-pending")).to_have_count(0, timeout=20_000)
    expect(page.locator("td.gcell", has_text="Slowly: Paris.")).to_have_count(3, timeout=20_000)
    # The per-model table follows the run live, and the grid says when the run has ended.
    expect(waiting).to_have_text("0", timeout=20_000)
    expect(scored).to_have_text("3")
    expect(page.locator("#grid-live")).to_contain_text("The run has ended", timeout=20_000)
    assert problems == []


def test_see_a_raw_call_annotate_and_rerun_one_cell(page, live_server, fake_provider, screenshot):
    run = made_off_the_loop(make_run, fake_provider)
    response = Response.objects.get(run=run, prompt_id="capital", model_id__endswith="cand-bad")
    problems = watch_console(page)
    page.goto(f"{live_server.url}/runs/{run.pk}/responses/{response.pk}/")

    # Every call, on demand: the candidate's request as sent and the raw body it got back.
    page.get_by_text("Show each call to the model and the judges").click()
    calls = page.locator(".calls details.call")
    expect(calls.first).to_be_visible()
    assert calls.count() == 1 + 6  # the candidate, then one call per judged point and judge
    first = calls.first
    first.locator("summary").click()
    expect(first).to_contain_text("Request as sent")
    expect(first.locator(".call-cols")).to_contain_text("What is the capital of France?")
    expect(first.locator(".call-cols")).to_contain_text('"content": "I think it is Lyon."')
    expect(first).to_contain_text("HTTP 200")
    page.evaluate("document.getElementById('calls-heading').scrollIntoView()")
    screenshot(page, "response-calls")

    # An annotation: thumbs down and a comment, saved in place.
    box = page.locator("#annotation")
    box.get_by_label("👎 down").check()
    box.get_by_label("Comment").fill("Names the wrong city.")
    box.get_by_role("button", name="Save annotation").click()
    expect(page.locator("#annotation")).to_contain_text("Saved.")
    expect(page.locator("#annotation textarea")).to_have_value("Names the wrong city.")
    page.evaluate("document.getElementById('annotation').scrollIntoView()")
    screenshot(page, "response-annotation")

    # Re-run this one cell: the model is asked again (not the cache) and now answers differently.
    made_off_the_loop(script, fake_provider,
                      [{"model": "cand-bad", "match": "capital of France", "reply": "Paris, on the Seine."}])
    page.get_by_text("Re-run this cell…").click()
    page.get_by_role("button", name=re.compile(r"^Re-run capital")).click()
    expect(page.locator(".messages")).to_contain_text("Re-running capital")
    expect(page.locator("#rendered")).to_contain_text("Paris, on the Seine.", timeout=20_000)
    expect(page.locator("#annotation")).to_contain_text("Written before this response was re-run")
    assert problems == []
