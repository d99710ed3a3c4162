import re

import pytest

# The home page is the blueprint library, which reads the database.
pytestmark = pytest.mark.django_db


def test_the_home_page_names_the_product(client):
    response = client.get("/")

    assert response.status_code == 200
    assert "<title>evalsite</title>" in response.text
    assert 'class="site-name" href="/"' in response.text


def test_the_home_page_loads_htmx_from_our_own_static_files(client):
    response = client.get("/")

    sources = re.findall(r'<script src="([^"]+)"', response.text)
    htmx = [s for s in sources if re.fullmatch(r"/static/django_htmx/htmx[\w.-]*\.js", s)]
    assert len(htmx) == 1
    script = client.get(htmx[0])
    script.close()
    assert script.status_code == 200
    assert not any(s.startswith(("http:", "https:", "//")) for s in sources)


def test_the_home_page_sends_the_csrf_token_with_every_htmx_request(client):
    response = client.get("/")

    assert response.text.count("X-CSRFToken") == 1
    assert re.search(r"<body hx-headers='\{\"X-CSRFToken\": \"\w+\"\}'>", response.text)


def test_the_stylesheet_is_served_without_collectstatic(client):
    response = client.get("/static/css/evalsite.css")
    response.close()

    assert response.status_code == 200


def test_healthz_answers_ok_in_plain_text(client):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert response.content == b"ok"


@pytest.mark.django_db(transaction=True)
def test_the_librarys_last_run_column_costs_the_same_queries_for_one_blueprint_or_twenty(client,
                                                                                      django_assert_max_num_queries):
    from tests.runs.test_api import OFFLINE, post

    def queries() -> int:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as captured:
            page = client.get("/").content.decode()
        return len(captured), page

    post(client, "/api/runs", {"blueprint": OFFLINE.replace("title: Offline", "title: first")})
    few, page = queries()
    assert page.count("1.00") >= 1  # the last run's score in its column
    for n in range(19):
        post(client, "/api/runs", {"blueprint": OFFLINE.replace("title: Offline", f"title: more {n}")})
    many, page = queries()
    assert page.count("1.00") >= 20 and many == few
