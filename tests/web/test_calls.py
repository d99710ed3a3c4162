"""Every call a response made, on demand: the request as sent (never a key or a header), the raw answer,
status, latency, tokens, cost, cache, and each retry with its reason. Runs are real (the worker path)
against the fake LLM server."""

from __future__ import annotations

import json

import pytest

from runs.engine import calls
from runs.models import Response
from tests.web.run_support import FAKE_KEY, fake_llm, fake_llm_server, fake_provider, make_run  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def _calls_page(client, response: Response) -> str:
    page = client.get(f"/runs/{response.run_id}/responses/{response.pk}/calls")
    assert page.status_code == 200
    return page.content.decode()


def test_a_response_keeps_its_candidate_and_judge_calls_as_sent_and_answered(client, fake_provider):
    run = make_run(fake_provider, models=("openai:cand-good",), judges=("openai:judge-a",))
    response = Response.objects.get(run=run, prompt_id="rome")

    log = response.call_log()
    candidate = [c for c in log if c["purpose"] == "candidate"]
    judges = [c for c in log if c["purpose"] == "judge"]
    # Two generated turns; one judge call per judged point (4 should, 1 should-not).
    assert [c["label"] for c in candidate] == ["turn 1", "turn 2"]
    assert candidate[1]["request"]["messages"][-1] == {"role": "user", "content": "Now make it cheaper."}
    assert candidate[0]["request"]["model"] == "cand-good" and candidate[0]["status"] == 200
    assert json.loads(candidate[0]["answer"])["choices"][0]["message"]["content"] == \
        "Day plan: the Colosseum by bus."
    assert candidate[0]["input_tokens"] and candidate[0]["latency_ms"] is not None
    assert len(judges) == 5 and all(c["model"] == "openai:judge-a" for c in judges)
    assert any("Suggests walking between sights." in c["label"] for c in judges)

    page = _calls_page(client, response)
    assert "Now make it cheaper." in page and "turn 2" in page and "HTTP 200" in page
    assert "Suggests walking between sights." in page and "/v1/chat/completions" in page
    assert FAKE_KEY not in page and "authorization" not in page.lower()
    # The response page loads them only when asked.
    detail = client.get(f"/runs/{run.pk}/responses/{response.pk}/").content.decode()
    assert f"/runs/{run.pk}/responses/{response.pk}/calls" in detail and "Now make it cheaper." not in detail.split(
        "calls-heading")[1]


def test_each_retry_is_shown_with_its_reason_and_the_answer_it_got(client, fake_provider):
    run = make_run(fake_provider, models=("openai:cand-fail-429-then-ok-retry-after-0.1",),
                   judges=("openai:judge-a",))
    response = Response.objects.filter(run=run, prompt_id="capital").first()

    first = response.call_log()[0]
    assert first["status"] == 200 and first["error"] is None
    retried, last = first["attempts"]
    assert retried["status"] == 429 and "429" in retried["reason"] and retried["wait_s"] >= 0.1
    assert "body" in retried and last["status"] == 200 and last["reason"] is None

    page = _calls_page(client, response)
    assert "1 retry" in page and "waited" in page and "HTTP 429" in page


def test_a_provider_that_echoes_the_key_never_puts_it_in_the_log(client, fake_provider):
    run = make_run(fake_provider, models=("openai:cand-always-401",), judges=("openai:judge-a",))
    response = Response.objects.filter(run=run, prompt_id="capital").first()

    assert response.status == "failed"
    blob = Response.objects.filter(pk=response.pk).values_list("candidate_calls", flat=True).get()
    assert FAKE_KEY.encode() not in calls.unpack(blob).__repr__().encode()
    call = response.call_log()[0]
    assert call["status"] == 401 and "401" in call["error"]
    page = _calls_page(client, response)
    assert "401" in page and FAKE_KEY not in page and FAKE_KEY[:12] not in page


def test_an_error_body_that_echoes_part_of_a_key_loses_that_word():
    from runs.engine.providers.router import _kept_body

    kept = _kept_body('{"error": "Incorrect API key provided: sk-test-not-a-re****3456"}', [FAKE_KEY], 401)
    assert "sk-test-not-a-re" not in kept and "[redacted]" in kept and "Incorrect API key" in kept
    assert _kept_body('{"ok": "sk-test-not-a-re"}', [FAKE_KEY], 200) == '{"ok": "sk-test-not-a-re"}'


def test_the_log_is_bounded_and_a_broken_blob_says_so():
    many = [{"purpose": "judge", "answer": "x" * 10} for _ in range(calls.MAX_CALLS)]
    with calls.recording() as log:
        for entry in many + [{"purpose": "judge"}] * 3:
            calls.record(entry)
    assert len(log) == calls.MAX_CALLS + 1 and log[-1] == {"dropped": 3}
    assert calls.clip("y" * (calls.MAX_BODY_CHARS + 5)).endswith("[5 more characters not kept]")
    assert calls.unpack(calls.pack(log))[:2] == log[:2]
    assert "could not be read" in calls.unpack(b"not zlib")[0]["unreadable"]
    calls.record({"outside": True})  # nothing collects outside a recording: ignored, no error


def test_a_request_kept_as_the_json_that_left_reads_back_as_the_same_request():
    body = {"model": "m", "messages": [{"role": "user", "content": 'a "quote", ünïcode, \u2028 and \\ too'}],
            "temperature": 0.0}
    raw = json.dumps(body, ensure_ascii=False)
    as_bytes = {"purpose": "judge", "label": "l", "request": body, calls.REQUEST_JSON: raw, "status": 200}
    as_dict = {k: v for k, v in as_bytes.items() if k != calls.REQUEST_JSON}
    only_bytes = {calls.REQUEST_JSON: raw}  # nothing else in the entry: still one JSON object

    read = calls.unpack(calls.pack([as_bytes, {"dropped": 2}, only_bytes]))

    assert read == [as_dict, {"dropped": 2}, {"request": body}]
    assert calls.REQUEST_JSON.encode() not in __import__("zlib").decompress(calls.pack([as_bytes]))
