"""The response page: the conversation, the response rendered by render_as beside the ideal, the points grouped
as the score groups them, each judge's reflection, the worked calculation, and a reviewer's override."""

import re

import pytest

from runs import start as run_start
from runs.models import PointAssessment, PointOverride, Response, Run

from .conftest import htmx
from .run_support import (  # noqa: F401
    fake_llm,
    fake_llm_server,
    fake_provider,
    make_blueprint,
    make_run,
)

pytestmark = pytest.mark.django_db(transaction=True)


def response_of(run, prompt_id, model="cand-good"):
    return Response.objects.get(run=run, prompt_id=prompt_id, variant_id=f"openai:{model}[temp:0]")


def page_of(client, response, **extra):
    return client.get(f"/runs/{response.run_id}/responses/{response.pk}/", **extra)


def section(html, heading_id):
    """The <section> whose heading has this id."""
    start = html.index(f'aria-labelledby="{heading_id}"')
    return html[start:html.index("</section>", start)]


def points_of(html):
    """The points section (it holds a section per group, so it runs to the end of the review)."""
    start = html.index('aria-labelledby="points-heading"')
    return html[start:]


def point_card(html, text):
    start = html.index(text)
    return html[html.rindex("<article", 0, start):html.index("</article>", start)]


# --- the conversation ---------------------------------------------------------------------------


def test_the_conversation_shows_system_authored_and_generated_turns(fake_provider, client):
    run = make_run(fake_provider)
    html = page_of(client, response_of(run, "rome")).content.decode()
    turns = re.findall(r'<li class="msg msg-(\w+)( msg-generated)?[^"]*">.*?<span class="role">(.*?)</span>.*?'
                       r'<div class="msg-body">\s*(.*?)\s*</div>\s*</li>', section(html, "conversation-heading"),
                       re.S)
    assert [(role, bool(generated)) for role, generated, _, _ in turns] == [
        ("system", False), ("user", False), ("assistant", True), ("user", False), ("assistant", True)]
    assert "You are concise." in turns[0][3]
    assert "Day plan: the Colosseum by bus." in turns[2][3] and "badge-generated" in turns[2][2]
    assert "authored" in turns[1][2]


def test_a_turn_that_was_never_generated_reads_to_be_generated_with_the_reason(fake_provider, client):
    run = make_run(fake_provider, models=("openai:always-401",), judges=("openai:judge-a",))
    response = response_of(run, "rome", "always-401")
    html = page_of(client, response).content.decode()
    conversation = section(html, "conversation-heading")
    assert conversation.count("to be generated") == 1
    assert "nothing was generated:" in conversation and "401" in conversation
    assert conversation.index("to be generated") < conversation.index("Now make it cheaper.")
    assert "Not evaluated" in html and "0.00" not in section(html, "conversation-heading")


def test_before_generation_the_page_shows_the_prompt_as_authored(client):
    blueprint = make_blueprint()
    run = run_start.start_run(blueprint, models=["openai:cand-good"], judges=["openai:judge-a"], enqueue=False)
    response = Response.objects.get(run=run, prompt_id="capital")
    html = page_of(client, response).content.decode()
    conversation = section(html, "conversation-heading")
    assert "You are concise." in conversation and "What is the capital of France?" in conversation
    assert "to be generated" in conversation and "not yet" in conversation
    assert "Not generated yet." in html


# --- the response, rendered ----------------------------------------------------------------------


def test_markdown_is_rendered_beside_the_ideal(fake_provider, client):
    run = make_run(fake_provider)
    html = page_of(client, response_of(run, "capital")).content.decode()
    rendered = html[html.index('<section id="rendered"'):html.index("</section>", html.index('id="rendered"'))]
    assert '<div class="response-markdown"><p><strong>Paris</strong> is the capital of France, on the Seine.' in rendered
    assert "Ideal response" in rendered
    assert '<p><strong>Paris</strong> is the capital of France.</p>' in rendered
    assert '<strong aria-current="true" class="mode mode-current">Markdown</strong>' in rendered
    assert 'href="?as=plaintext" hx-get="?as=plaintext" hx-target="#rendered"' in rendered


def test_plain_text_shows_the_source_and_htmx_gets_only_the_fragment(fake_provider, client):
    run = make_run(fake_provider)
    response = response_of(run, "capital")
    fragment = client.get(f"/runs/{run.pk}/responses/{response.pk}/?as=plaintext", **htmx(HTTP_HX_TARGET="rendered"))
    body = fragment.content.decode()
    assert body.lstrip().startswith('<section id="rendered"') and "<html" not in body
    assert '<pre class="response-text">**Paris** is the capital of France, on the Seine.</pre>' in body
    assert '<pre class="response-text">**Paris** is the capital of France.</pre>' in body  # the ideal too


def test_html_is_shown_in_a_sandboxed_frame_with_its_own_policy_and_the_source_one_click_away(fake_provider, client):
    run = make_run(fake_provider)
    response = response_of(run, "page")
    html = page_of(client, response).content.decode()
    frame = re.search(r'<iframe class="html-frame"[^>]*>', html).group(0)
    assert 'sandbox=""' in frame
    assert "&lt;h1&gt;Hello&lt;/h1&gt;" in frame  # the document is in srcdoc, escaped
    assert "Content-Security-Policy" in frame and "default-src" in frame
    assert "render_as: html" in html
    source = client.get(f"/runs/{run.pk}/responses/{response.pk}/?as=plaintext").content.decode()
    assert "&lt;h1&gt;Hello&lt;/h1&gt;&lt;p&gt;A small page.&lt;/p&gt;" in source and "<iframe" not in source


# --- the points ------------------------------------------------------------------------------------


def test_required_points_show_score_kind_weight_citation_judges_and_reflections(fake_provider, client):
    run = make_run(fake_provider)
    html = page_of(client, response_of(run, "capital")).content.decode()
    card = point_card(html, "Names Paris as the capital.")
    assert '<span class="score-chip heat-10">1.00</span>' in card
    assert ">judged<" in card and "weight ×2" in card and "Citation: Geography 101" in card
    assert card.count('<li class="verdict-item') == 2
    assert "holistic-judge-a(openai:judge-a)" in card and "holistic-judge-b(openai:judge-b)" in card
    assert '<p class="reflection">It names Paris as the capital.</p>' in card
    assert "Raw judge answer" in card
    assert "&lt;classification&gt;CLASS_EXACTLY_MET&lt;/classification&gt;" in card
    function = point_card(html, "$icontains")
    assert '<code class="fn">$icontains(&quot;paris&quot;)</code>' in function and ">function<" in function


def test_judge_disagreement_is_flagged_on_the_point(fake_provider, client):
    run = make_run(fake_provider)
    card = point_card(page_of(client, response_of(run, "capital")).content.decode(), "Mentions the Seine river.")
    assert "judges disagree (σ 0.50)" in card
    assert "It says &#x27;on the Seine&#x27;." in card and "The river is named only in passing." in card


def test_an_errored_point_is_not_evaluated_never_passed_or_failed(fake_provider, client):
    run = make_run(fake_provider)
    card = point_card(page_of(client, response_of(run, "capital")).content.decode(), "$factcheck")
    assert '<span class="score-chip heat-none">n/e</span>' in card
    assert "<strong>Not evaluated:</strong> `$factcheck` is not supported" in card
    assert "passed" not in card.lower() and "failed" not in card.lower()


def test_paths_are_boxes_with_their_scores_the_winner_highlighted_and_why_the_others_lost(fake_provider, client):
    run = make_run(fake_provider)
    html = page_of(client, response_of(run, "rome")).content.decode()
    points = points_of(html)
    boxes = re.findall(r'<section class="point-group-box group-(\w+) role-([\w-]+)".*?<h3[^>]*>\s*(.*?)\s*<code',
                       points, re.S)
    assert boxes == [("should", "best", "Alternative path 1"), ("should", "lost", "Alternative path 2"),
                     ("should_not", "worst", "Should-not path 1")]
    assert "winning path" in points
    assert "Does not count: 0.75 is below the best path&#x27;s 1.00." in points
    assert "the point's score is the inverse" in points


def test_the_worked_calculation_matches_the_stored_one(fake_provider, client):
    run = make_run(fake_provider)
    capital = response_of(run, "capital")
    html = page_of(client, capital).content.decode()
    calculation = section(html, "calculation-heading")
    assert "(1 × 1.00 + 2 × 1.00 + 1 × 0.50 + 1 × 1.00) / 5 = <strong>0.900</strong>" in calculation
    assert "Score = mean of required points\n          = 0.900" in calculation
    assert capital.calculation["score"] == pytest.approx(0.9)

    rome = response_of(run, "rome")
    calculation = section(page_of(client, rome).content.decode(), "calculation-heading")
    assert rome.calculation["bestPath"] == "path_0" and rome.calculation["worstNotPath"] == "not_path_0"
    assert "(1 × 0.50 + 1 × 1.00) / 2 = <strong>0.750</strong>" in calculation
    assert "= (1.000 + 1.000) / 2 = 1.000" in calculation
    assert '<li class="calc-lost">' in calculation


# --- overrides ------------------------------------------------------------------------------------


def override_url(response, position):
    return f"/runs/{response.run_id}/responses/{response.pk}/points/{position}/override"


def test_an_override_changes_the_score_keeps_the_verdict_and_updates_the_run(fake_provider, client):
    run = make_run(fake_provider)
    response = response_of(run, "capital")
    seine = PointAssessment.objects.get(response=response, text="Mentions the Seine river.")
    before_verdicts = list(seine.verdicts)
    reply = client.post(override_url(response, seine.position),
                        {"score": "1", "reason": "It names the Seine.", "who": "Ada"}, **htmx())
    body = reply.content.decode()
    assert reply.status_code == 200
    assert body.lstrip().startswith('<div id="review">')
    assert '<section id="score-summary" class="score-summary" hx-swap-oob="true"' in body
    assert '<span class="score-chip score-big heat-10">1.00</span>' in body
    assert "a reviewer's override applies" in body and "0.90 before overrides" in body
    assert "Override on point 3 saved: the response&#x27;s score is 1.00 (it was 0.90)." in body
    assert "The judges' score was 0.50." in body

    response.refresh_from_db()
    seine.refresh_from_db()
    assert (response.score, response.judged_score) == (1.0, 0.9)
    assert seine.score == 0.5 and seine.verdicts == before_verdicts
    assert PointOverride.objects.get(assessment=seine).who == "Ada"
    run.refresh_from_db()
    assert run.aggregates["cells"]["capital"]["openai:cand-good[temp:0]"] == 1.0
    assert run.aggregates["variants"]["openai:cand-good[temp:0]"]["mean"] == 1.0


def test_removing_the_override_restores_the_judges_score(fake_provider, client):
    run = make_run(fake_provider)
    response = response_of(run, "capital")
    seine = PointAssessment.objects.get(response=response, text="Mentions the Seine river.")
    client.post(override_url(response, seine.position), {"score": "1", "reason": "named"})
    reply = client.post(override_url(response, seine.position), {"action": "remove"}, follow=True)
    assert "Override on point 3 removed: the response&#x27;s score is 0.90 (it was 1.00)." in reply.content.decode()
    assert reply.redirect_chain[-1][0].endswith(f"/responses/{response.pk}/#point-3")
    response.refresh_from_db()
    assert response.score == 0.9 and not PointOverride.objects.exists()
    run.refresh_from_db()
    assert run.aggregates["variants"]["openai:cand-good[temp:0]"]["mean"] == pytest.approx(0.95)


def test_an_override_on_a_should_not_point_moves_the_violation_flag(fake_provider, client):
    run = make_run(fake_provider)
    response = response_of(run, "capital", "cand-bad")
    assert response.violated_should_not
    lyon = PointAssessment.objects.get(response=response, text="Names Lyon as the capital.")
    client.post(override_url(response, lyon.position), {"score": "1", "reason": "It was a joke about Lyon."})
    response.refresh_from_db()
    assert not response.violated_should_not
    run.refresh_from_db()
    assert run.aggregates["variants"]["openai:cand-bad[temp:0]"]["violatedShouldNot"] == 1  # rome still violates


def test_an_override_can_score_a_point_that_was_not_evaluated(fake_provider, client):
    run = make_run(fake_provider)
    response = response_of(run, "capital")
    factcheck = PointAssessment.objects.get(response=response, fn="factcheck")
    client.post(override_url(response, factcheck.position), {"score": "0", "reason": "Checked by hand: wrong."})
    response.refresh_from_db()
    assert response.score == 0.75  # (1 + 2 + 0.5 + 0 + 1) / 6
    html = page_of(client, response).content.decode()
    assert "The point had no score of its own." in html


@pytest.mark.parametrize("data, message", [
    ({"score": "1.5", "reason": "x"}, "A score is between 0 and 1."),
    ({"score": "high", "reason": "x"}, "Give a score between 0 and 1."),
    ({"score": "1", "reason": "  "}, "Say why: the reason stays beside the judges&#x27; verdict."),
])
def test_a_bad_override_is_refused_with_the_reason_in_the_form(fake_provider, client, data, message):
    run = make_run(fake_provider)
    response = response_of(run, "capital")
    reply = client.post(override_url(response, 2), data, **htmx())
    body = reply.content.decode()
    assert reply.status_code == 200
    assert f'<p class="form-error" role="alert">{message}</p>' in body
    assert '<details class="override-box" open>' in body
    assert not PointOverride.objects.exists()
    response.refresh_from_db()
    assert response.score == 0.9
    # What the reviewer typed is still in the form, to fix and send again.
    card = body.split('id="point-3"')[1].split("</article>")[0]
    assert f'value="{data["score"]}"' in card and f">{data['reason']}</textarea>" in card


def test_the_summary_and_a_function_points_override_do_not_credit_the_judges(fake_provider, client):
    run = make_run(fake_provider)
    response = response_of(run, "capital")
    function_point = PointAssessment.objects.get(response=response, kind="function", fn="icontains")
    client.post(override_url(response, function_point.position), {"score": "0", "reason": "checked"})
    body = client.get(f"/runs/{run.pk}/responses/{response.pk}/").content.decode()
    assert "The function's score was 1.00." in body and "The judges' score was 1.00" not in body
    assert "before overrides" in body and "the judges gave" not in body


def test_override_needs_post_and_a_point_of_this_response(fake_provider, client):
    run = make_run(fake_provider)
    response = response_of(run, "capital")
    assert client.get(override_url(response, 0)).status_code == 405
    assert client.post(override_url(response, 99), {"score": "1", "reason": "x"}).status_code == 404
    other = Run.objects.create(revision=run.revision, blueprint=run.blueprint, label="x")
    assert client.get(f"/runs/{other.pk}/responses/{response.pk}/").status_code == 404


def test_a_response_not_finished_cannot_be_overridden(client):
    blueprint = make_blueprint("title: T\nmodels: [fixtures:a]\nfixtures: {responses: {p: 'yes'}}\n---\n"
                               "- id: p\n  prompt: Q?\n  should: [$contains: 'yes']\n")
    run = run_start.start_run(blueprint)
    response = Response.objects.get(run=run)
    point = PointAssessment.objects.get(response=response)
    Response.objects.filter(pk=response.pk).update(status="running")
    reply = client.post(override_url(response, point.position), {"score": "0", "reason": "x"}, **htmx())
    assert "still being worked on" in reply.content.decode()
    assert not PointOverride.objects.exists()
