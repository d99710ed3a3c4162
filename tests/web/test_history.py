import pytest

from blueprints.models import Blueprint
from tests.web.conftest import VALID, htmx

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_revisions(make_blueprint):
    blueprint = make_blueprint()
    blueprint.save_revision(VALID.replace("France", "Spain"))
    blueprint.save_revision(VALID.replace("France", "Italy"))
    return blueprint


def test_the_history_lists_every_revision_and_diffs_the_last_two(client, three_revisions):
    response = client.get("/blueprints/capitals/history/")

    assert response.status_code == 200
    assert response.text.count('name="a" value=') == 3
    assert "Changes from revision 2 to revision 3" in response.text
    assert '<tr class="diff-del">' in response.text and "What is the capital of Spain?" in response.text
    assert '<tr class="diff-add">' in response.text and "What is the capital of Italy?" in response.text


def test_any_two_revisions_can_be_compared_and_htmx_gets_the_diff_fragment(client, three_revisions):
    response = client.get("/blueprints/capitals/history/", {"a": 1, "b": 3}, **htmx())

    assert response.text.lstrip().startswith('<section id="diff"')
    assert "Changes from revision 1 to revision 3" in response.text
    assert "capital of France?" in response.text and "capital of Italy?" in response.text


def test_comparing_a_missing_revision_says_so(client, three_revisions):
    response = client.get("/blueprints/capitals/history/", {"a": 1, "b": 9})

    assert "There is no revision 9." in response.text


def test_restoring_makes_a_new_revision_with_the_old_text(client, three_revisions):
    response = client.post("/blueprints/capitals/revisions/1/restore/", follow=True)

    blueprint = Blueprint.objects.get(slug="capitals")
    assert blueprint.current_revision.number == 4
    assert blueprint.current_revision.text == VALID
    assert blueprint.current_revision.summary == "Restored revision 1"
    assert "Restored revision 1 as revision 4." in response.text


def test_a_revision_page_shows_its_exact_text(client, three_revisions):
    response = client.get("/blueprints/capitals/revisions/2/")

    assert "What is the capital of Spain?" in response.text
    assert "Restore this revision" in response.text


def test_restoring_needs_a_post(client, three_revisions):
    assert client.get("/blueprints/capitals/revisions/1/restore/").status_code == 405


def test_a_revision_page_has_an_anchor_for_every_line(client, make_blueprint):
    make_blueprint()
    response = client.get("/blueprints/capitals/revisions/1/")
    assert response.status_code == 200
    assert 'id="L1"' in response.text and 'id="L3"' in response.text
