"""Each run action is one function (runs/actions.py) that the run page and the API both call: the same checks,
the same words, and the API's status for a refusal (409: the run's state forbids it now)."""

from __future__ import annotations

import pytest

from runs.models import Run
from tests.runs.test_api import OFFLINE, post

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def finished(client) -> Run:
    response = post(client, "/api/runs", {"blueprint": OFFLINE})
    run = Run.objects.get(pk=response.json()["id"])
    assert run.status == "done"
    return run


def test_cancel_on_a_finished_run_says_so_in_the_api_and_on_the_page(client, finished):
    api = post(client, f"/api/runs/{finished.pk}/cancel", {})
    assert api.status_code == 409
    message = api.json()["error"]
    assert message == f"Run {finished.pk} is already done; there is nothing to cancel."
    page = client.post(f"/runs/{finished.pk}/cancel", follow=True).content.decode()
    assert message in page


def test_resume_and_retry_refuse_with_the_reason(client, finished):
    resumed = post(client, f"/api/runs/{finished.pk}/resume", {})
    assert resumed.status_code == 409 and "nothing left to run" in resumed.json()["error"]
    retried = post(client, f"/api/runs/{finished.pk}/retry-failed", {})
    assert retried.status_code == 200 and retried.json()["message"] == "Nothing to retry: no item ended in error."


def test_a_control_post_without_a_body_works_but_not_from_another_site(client, finished):
    bare = client.generic("POST", f"/api/runs/{finished.pk}/retry-failed")  # curl -X POST
    assert bare.status_code == 200, bare.content
    for headers in ({"HTTP_ORIGIN": "http://evil.example"}, {"HTTP_SEC_FETCH_SITE": "cross-site"}):
        refused = client.generic("POST", f"/api/runs/{finished.pk}/retry-failed", **headers)
        assert refused.status_code == 415, headers


def test_rename_through_both_doors_with_one_rule(client, finished):
    too_long = post(client, f"/api/runs/{finished.pk}/rename", {"name": "x" * 201})
    assert too_long.status_code == 400 and too_long.json()["error"] == "A run's name is at most 200 characters."
    page = client.post(f"/runs/{finished.pk}/rename", {"name": "x" * 201}, follow=True).content.decode()
    assert "A run&#x27;s name is at most 200 characters." in page or "A run's name is at most 200 characters." in page
    ok = post(client, f"/api/runs/{finished.pk}/rename", {"name": "  Baseline   one "})
    assert ok.status_code == 200 and ok.json()["name"] == "Baseline one"
