import pytest

from blueprints.models import Blueprint
from tests.web.conftest import VALID, htmx

pytestmark = pytest.mark.django_db


def test_a_first_visit_fills_the_empty_library_with_the_examples(client):
    response = client.get("/")

    assert response.status_code == 200
    assert Blueprint.objects.filter(slug="first-steps-offline").exists()
    assert "First steps: a blueprint that runs offline" in response.text


def test_the_examples_are_loaded_only_once(client):
    client.get("/")
    count = Blueprint.objects.count()
    client.post("/examples/")

    assert Blueprint.objects.count() == count
    assert client.get("/").text.count("First steps: a blueprint that runs offline") == 1


def test_the_library_lists_title_tags_prompt_count_and_never_run(client, make_blueprint):
    make_blueprint()

    response = client.get("/")

    assert "Capital cities" in response.text
    assert 'href="?tag=geography&amp;sort=name"' in response.text
    assert '<td class="num">1</td>' in response.text
    assert "never run" in response.text
    assert "First steps" not in response.text  # a library with blueprints gets no examples


def test_a_draft_is_marked_with_its_error_count(client, make_blueprint):
    make_blueprint("title: Broken\nmodels: [a:b]\nprompts: 3\n", slug="broken")

    response = client.get("/")

    assert "Broken" in response.text
    assert "draft: 1 error" in response.text


@pytest.mark.parametrize(("query", "found"), [
    ("capital", True),       # title
    ("geography", True),     # tag
    ("France?", True),       # text of the current revision
    ("capitals", True),      # id
    ("photosynthesis", False),
])
def test_search_finds_title_tag_and_text(client, make_blueprint, query, found):
    make_blueprint()

    response = client.get("/", {"q": query})

    assert ("Capital cities" in response.text) is found


def test_the_tag_filter_keeps_only_that_tag(client, make_blueprint):
    make_blueprint()
    make_blueprint(VALID.replace("Capital cities", "Rivers").replace("[geography, facts]", "[water]"), slug="rivers")

    response = client.get("/", {"tag": "water"})

    assert "Rivers" in response.text
    assert "Capital cities" not in response.text
    assert "1 of 2 blueprints" in response.text


def test_sorting_by_name_or_by_last_change(client, make_blueprint):
    make_blueprint(VALID.replace("Capital cities", "Zebra facts"), slug="zebra")
    make_blueprint(VALID.replace("Capital cities", "Aardvark facts"), slug="aardvark")
    Blueprint.objects.get(slug="zebra").save_revision(VALID.replace("Capital cities", "Zebra facts") + "\n")

    by_name = client.get("/", {"sort": "name"}).text
    by_change = client.get("/", {"sort": "changed"}).text

    assert by_name.index("Aardvark facts") < by_name.index("Zebra facts")
    assert by_change.index("Zebra facts") < by_change.index("Aardvark facts")


def test_htmx_search_gets_only_the_results_fragment(client, make_blueprint):
    make_blueprint()

    response = client.get("/", {"q": "capital"}, **htmx())

    assert response.status_code == 200
    assert response.text.lstrip().startswith('<section id="library-results"')
    assert "<html" not in response.text
    assert "Capital cities" in response.text


def test_the_search_form_works_without_javascript(client, make_blueprint):
    make_blueprint()

    page = client.get("/").text

    assert '<form class="library-filters" method="get" action="/"' in page
    assert 'hx-get="/"' in page
