"""A catastrophic regex in "try a response" answers in about the time limit while the server keeps
answering other requests (issue 12, item 1): the match is time-limited and releases the interpreter lock."""

import html
import re
import threading
import time

import httpx
import pytest

from blueprints.models import Blueprint

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = """\
title: Catastrophic
models: [openai:gpt-4.1-mini]
---
- id: letters
  prompt: Forty a's and a b.
  should:
    - $match: "^(a|a)+$"
    - $contains: "b"
"""


def test_healthz_answers_while_a_catastrophic_regex_is_being_tried(live_server, settings):
    assert settings.EVALSITE_LIMITS.regex_timeout_s == 1.0  # the default, as production runs it
    Blueprint.objects.create(slug="catastrophic", title="").save_revision(TEXT)
    url = f"{live_server.url}/blueprints/catastrophic/try/"
    with httpx.Client() as client:
        page = client.get(url)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    outcome: dict = {}

    def try_it() -> None:
        started = time.monotonic()
        with httpx.Client(timeout=30) as client:
            client.cookies.update(page.cookies)
            outcome["response"] = client.post(url, data={"csrfmiddlewaretoken": token, "prompt": "letters",
                                                         "response": "a" * 40 + "b"}, headers={"Referer": url})
        outcome["elapsed"] = time.monotonic() - started

    worker = threading.Thread(target=try_it)
    worker.start()
    answered = []  # when each /healthz answer arrived, while the try request was running
    with httpx.Client(timeout=10) as client:
        last = time.monotonic()
        while worker.is_alive() and len(answered) < 200:
            assert client.get(f"{live_server.url}/healthz").text == "ok"
            now = time.monotonic()
            answered.append(now - last)
            last = now
            time.sleep(0.02)
    worker.join(30)

    # The server (same process) kept answering all along: many answers, never a long gap. With the
    # lock held during the match (Python's `re`, or `regex` without concurrent=True) there is one
    # gap as long as the match: minutes under `re`, the whole limit here.
    assert len(answered) >= 10, answered
    assert max(answered) < 0.5, answered
    response = outcome["response"]
    assert response.status_code == 200
    assert outcome["elapsed"] < 6.0  # about the 1 s limit plus the page
    text = html.unescape(response.text)
    assert "not evaluated" in text
    assert "took longer than 1 s on this response; simplify it or raise EVALSITE_REGEX_TIMEOUT_S" in text
