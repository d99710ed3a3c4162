"""Responses are untrusted: scripts, event handlers, javascript: links, CSS that calls home and a 1 MB answer
reach the pages as text or as sanitised markup in a sandbox, and the pages stay small and usable."""

from html.parser import HTMLParser

import pytest

from runs.models import Response

from .run_support import (  # noqa: F401
    EVIL,
    HUGE,
    fake_llm,
    fake_llm_server,
    fake_provider,
    make_hostile_run,
)

pytestmark = pytest.mark.django_db(transaction=True)


class Tags(HTMLParser):
    """Every start tag a browser would build from a document, with its attributes."""

    def __init__(self, html):
        super().__init__(convert_charrefs=True)
        self.tags = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag

    def named(self, *names):
        return [attrs for tag, attrs in self.tags if tag in names]


def assert_nothing_can_run_or_call_home(html, *, frames_allowed=0):
    """No script of the model's, no event handler, no javascript: URL, nothing fetched from its host.

    A link the model wrote may stay (a reviewer has to click it, and it opens with noopener, noreferrer);
    anything a browser loads by itself (images, styles, frames, objects) may not.
    """
    tags = Tags(html)
    for tag, attrs in tags.tags:
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        for name, value in attrs.items():
            value = (value or "").strip().lower()
            if name in ("href", "src", "action", "formaction", "data", "hx-get", "hx-post"):
                assert not value.startswith(("javascript:", "data:text/html")), (tag, attrs)
            if EVIL in value:
                assert tag == "a" and name == "href" and "noopener" in attrs.get("rel", ""), (tag, attrs)
    assert all(attrs.get("src", "").startswith("/static/") for attrs in tags.named("script")), tags.named("script")
    assert not [t for t, a in tags.tags if t in ("style", "img", "object", "embed", "base")
                or (t == "svg" and a.get("class") != "score-chart")  # our chart only
                or (t == "link" and a.get("rel") != "stylesheet" and (a.get("rel"), a.get("href")) != ("icon", "data:,"))
                or (t == "meta" and "http-equiv" in a)]
    assert all(attrs.get("method") == "post" and attrs.get("action", "/runs/").startswith("/runs/")
               for attrs in tags.named("form"))  # only our own forms: overrides and run controls
    assert all(attrs.get("id", "").startswith(("ov-reason-", "annotation-")) for attrs in tags.named("textarea"))
    frames = tags.named("iframe")
    assert len(frames) == frames_allowed and all(f.get("sandbox") == "" and "src" not in f for f in frames)
    return tags


@pytest.fixture
def hostile(fake_provider):
    run = make_hostile_run(fake_provider)
    return run, {r.prompt_id: r for r in Response.objects.filter(run=run)}


def test_markdown_output_cannot_add_scripts_handlers_links_styles_or_frames(hostile, client):
    run, responses = hostile
    page = client.get(f"/runs/{run.pk}/responses/{responses['md'].pk}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert_nothing_can_run_or_call_home(html)
    assert "&lt;script&gt;window.pwned = 1; alert(1)&lt;/script&gt;" in html  # shown, as text
    # The closing tags the model wrote did not close ours: the page still has its points and footer structure.
    assert html.count("<main") == 1 and html.rstrip().endswith("</html>")
    assert 'id="review"' in html and "Override this score" in html


def test_html_output_is_sanitised_and_sandboxed_and_its_policy_forbids_fetching(hostile, client):
    run, responses = hostile
    html = client.get(f"/runs/{run.pk}/responses/{responses['web'].pk}/").content.decode()
    (frame,) = assert_nothing_can_run_or_call_home(html, frames_allowed=1).named("iframe")
    document = frame["srcdoc"]
    inside = Tags(document)
    assert not [tag for tag, _ in inside.tags if tag in ("script", "img", "form", "input", "object", "svg",
                                                          "iframe", "button", "link")]
    assert len(inside.named("style")) == 1  # ours; the model's <style> is gone (no @import, no url() below)
    assert inside.named("base") == [{"target": "_blank"}]  # ours: no address, and popups are sandboxed away
    (policy,) = [m["content"] for m in inside.named("meta") if m.get("http-equiv") == "Content-Security-Policy"]
    assert policy.startswith("default-src 'none'")
    assert not [(t, a) for t, a in inside.tags if any(k.startswith("on") for k in a)]
    assert inside.named("a") == [{"rel": "noopener noreferrer nofollow"}]  # the javascript: address is gone
    assert "<h1>hello</h1>" in document
    assert "@import" not in document and "url(" not in document and "refresh" not in document
    assert '<p style="color:red">styled</p>' in document  # harmless style kept
    assert "default-src 'self'" in client.get(f"/runs/{run.pk}/responses/{responses['web'].pk}/") \
        .headers["Content-Security-Policy"]


def test_a_one_megabyte_response_renders_only_its_beginning_and_links_the_whole(hostile, client):
    run, responses = hostile
    huge = responses["huge"]
    assert len(huge.text) == len(HUGE) == 1_048_576
    page = client.get(f"/runs/{run.pk}/responses/{huge.pk}/")
    html = page.content.decode()
    assert len(html) < 400_000  # the conversation and the rendering are both capped
    assert "Showing the first 50,000 of 1,048,576 characters." in html
    assert f'href="/runs/{run.pk}/responses/{huge.pk}/text"' in html
    whole = client.get(f"/runs/{run.pk}/responses/{huge.pk}/text")
    assert whole["Content-Type"] == "text/plain; charset=utf-8"
    assert whole["X-Content-Type-Options"] == "nosniff"
    assert whole["Content-Security-Policy"].startswith("sandbox")
    assert whole.content.decode() == HUGE
    side_by_side = client.get(f"/runs/{run.pk}/prompts/{huge.prompt_index}/").content.decode()
    assert len(side_by_side) < 200_000 and "The first 20,000 of 1,048,576 characters." in side_by_side


def test_the_run_page_and_report_stay_clean(hostile, client):
    run, _ = hostile
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert_nothing_can_run_or_call_home(html)
    report = b"".join(client.get(f"/runs/{run.pk}/report.html").streaming_content).decode()
    tags = Tags(report)
    assert not tags.named("script", "img", "object", "link", "base", "form")
    # An HTML response is in a sandboxed frame (as on the site) whose document loads and runs nothing.
    frames = tags.named("iframe")
    assert frames and all(f.get("sandbox") == "" and "src" not in f for f in frames)
    for frame in frames:
        inside = Tags(frame["srcdoc"])
        assert not [t for t, _ in inside.tags if t in ("script", "img", "form", "iframe", "object", "link", "a")]
        assert not [(t, a) for t, a in inside.tags if any(k.startswith("on") for k in a)]
        assert "http" not in frame["srcdoc"].split("</style>", 1)[1]  # no address left, not even a link's
    assert all(not a.startswith("on") for _, attrs in tags.tags for a in attrs)
    assert all(attrs.get("href", "#").startswith("#") for attrs in tags.named("a"))  # in-document links only
    assert len(tags.named("style")) == 1  # the report's own
