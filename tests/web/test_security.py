"""Links, the content policy, outside images and who may come in (evalsite/security.py)."""

from __future__ import annotations

import re

import pytest

from blueprints.editing import render_markdown
from blueprints.importing import import_files
from evalsite.security import CSP, is_loopback, safe_url

pytestmark = pytest.mark.django_db

HOSTILE = """title: Hostile
description: |
  Look ![pixel](https://tracker.example.com/p.gif) and ![inline](data:image/png;base64,iVBORw0KGgo=)
  and [a link](javascript:alert(2)).
author:
  name: Mallory
  url: "javascript:alert(1)"
references:
  - title: Evil
    url: " JaVaScRiPt:alert(3)"
  - title: Tabbed
    url: "java\\tscript:alert(4)"
  - title: Data
    url: "data:text/html,<script>alert(5)</script>"
  - title: Good
    url: https://example.org/paper
models: [openai:gpt-4.1-mini]
---
- prompt: Hi
  should: [$contains: hi]
"""


@pytest.mark.parametrize("url", ["javascript:alert(1)", "JaVaScRiPt:alert(1)", " javascript:x", "java\tscript:x",
                                 "java\nscript:x", "\x01javascript:x", "data:text/html,x", "vbscript:x", "/relative",
                                 "//evil.example/x", "https://", "", None, 17, "file:///etc/passwd"])
def test_only_web_and_mail_urls_are_links(url):
    assert safe_url(url) is None


@pytest.mark.parametrize("url", ["https://example.org/x?a=1", "http://localhost:8000/", "mailto:a@example.org"])
def test_web_and_mail_urls_stay(url):
    assert safe_url(url) == url


def test_the_blueprint_page_links_nothing_but_the_web(client):
    import_files([("hostile.yml", HOSTILE, {})], via="test")
    html = client.get("/blueprints/hostile/").content.decode()
    hrefs = re.findall(r'<a\b[^>]*href="([^"]*)"', html)
    assert not [h for h in hrefs if "script" in h.lower() or h.lower().startswith("data:")], hrefs
    assert 'href="https://example.org/paper"' in html and "Mallory" in html
    # The tracking pixel is a link the reader may click, never an image the page loads.
    assert "tracker.example.com/p.gif" not in re.findall(r'<img[^>]*src="([^"]*)"', html)
    assert "[image: pixel, from tracker.example.com; opens in a new tab]" in html


def test_markdown_images_from_other_hosts_are_never_loaded():
    html = render_markdown("![a](https://t.example/p.png) ![b](/static/x.png)")
    assert "<img" not in html and "t.example" in html


def test_every_html_page_has_a_strict_policy_and_no_inline_script(client):
    import_files([("hostile.yml", HOSTILE, {})], via="test")
    for url in ("/", "/blueprints/hostile/", "/blueprints/hostile/edit/", "/import/", "/collections/", "/runs/",
                "/no/such/page/"):
        response = client.get(url)
        assert response["Content-Security-Policy"] == CSP, url
        assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP.split("script-src")[1].split(";")[0]
        scripts = re.findall(r"<script\b([^>]*)>", response.content.decode())
        assert all("src=" in attrs for attrs in scripts), (url, scripts)


@pytest.mark.parametrize(("address", "ok"), [("127.0.0.1", True), ("::1", True), ("::ffff:127.0.0.1", True),
                                             ("10.0.0.5", False), ("192.168.1.2", False), ("::ffff:10.0.0.1", False),
                                             ("", False), ("garbage", False)])
def test_loopback(address, ok):
    assert is_loopback(address) is ok


def test_without_a_token_only_loopback_may_use_the_site(client):
    for url in ("/", "/runs/", "/api/runs/1", "/collections/"):
        assert client.get(url, REMOTE_ADDR="10.0.0.5").status_code == 403, url
    assert client.post("/runs/start", {"blueprint": "x"}, REMOTE_ADDR="10.0.0.5").status_code == 403
    assert client.get("/runs/", REMOTE_ADDR="::ffff:127.0.0.1").status_code == 200
    assert client.get("/healthz", REMOTE_ADDR="10.0.0.5").status_code == 200


def test_with_a_token_every_page_and_call_needs_it(client, settings):
    settings.EVALSITE_API_TOKEN = "tok-" + "x" * 20
    page = client.get("/runs/")
    assert page.status_code == 302 and page["Location"].startswith("/signin?next=/runs/")
    assert client.get("/api/runs/1").status_code == 401
    assert client.get("/runs/", HTTP_AUTHORIZATION="Bearer " + settings.EVALSITE_API_TOKEN).status_code == 200
    wrong = client.post("/signin", {"token": "nope", "next": "/runs/"})
    assert wrong.status_code == 401 and "not the token" in wrong.content.decode()
    signed = client.post("/signin", {"token": settings.EVALSITE_API_TOKEN, "next": "/runs/"})
    assert signed.status_code == 302 and signed["Location"] == "/runs/"
    assert settings.EVALSITE_API_TOKEN not in signed.cookies["evalsite_access"].value
    assert client.get("/runs/").status_code == 200  # the cookie is enough now, from any address
    assert client.get("/runs/", REMOTE_ADDR="10.0.0.5").status_code == 200
    settings.EVALSITE_API_TOKEN = "another-token-" + "y" * 20
    assert client.get("/runs/").status_code == 302  # a changed token signs everyone out
    off_site = client.post("/signin", {"token": settings.EVALSITE_API_TOKEN, "next": "https://evil.example/"})
    assert off_site["Location"] == "/"
