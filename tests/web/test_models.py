import hashlib

import pytest
from django.core.exceptions import ValidationError

from blueprints.models import Blueprint, BlueprintRevision, ModelCollection
from tests.web.conftest import VALID

pytestmark = pytest.mark.django_db


def test_saving_text_makes_a_numbered_revision_and_copies_what_the_library_shows(make_blueprint):
    blueprint = make_blueprint()

    revision = blueprint.current_revision
    assert (revision.number, revision.is_valid, revision.prompt_count, revision.point_count) == (1, True, 1, 2)
    assert (blueprint.title, blueprint.description, blueprint.tags) == ("Capital cities", "Checks **capitals**.",
                                                                       ["geography", "facts"])
    assert blueprint.tags_key == "|geography|facts|"
    assert revision.sha256 == hashlib.sha256(VALID.encode()).hexdigest()
    assert revision.dialect == "weval"


def test_the_same_text_makes_no_new_revision(make_blueprint):
    blueprint = make_blueprint()

    revision, created = blueprint.save_revision(VALID)

    assert not created and revision.number == 1
    assert blueprint.revisions.count() == 1


def test_companion_files_count_as_a_change(make_blueprint):
    blueprint = make_blueprint()

    _, created = blueprint.save_revision(VALID, files={"fixtures.json": "{}"})

    assert created and blueprint.current_revision.files == {"fixtures.json": "{}"}


def test_a_revision_is_never_edited(make_blueprint):
    revision = make_blueprint().current_revision
    revision.text = "changed"

    with pytest.raises(ValueError, match="never edited"):
        revision.save()
    assert BlueprintRevision.objects.get(pk=revision.pk).text == VALID


def test_a_draft_keeps_the_last_good_title_and_counts_its_errors(make_blueprint):
    blueprint = make_blueprint()

    revision, _ = blueprint.save_revision("title: [\n")

    assert (revision.is_valid, revision.error_count, revision.prompt_count) == (False, 1, None)
    assert blueprint.title == "Capital cities"


def test_a_new_draft_takes_its_title_from_the_title_line():
    blueprint = Blueprint.objects.create(slug="eu", title="")

    blueprint.save_revision("title: EU AI Act\ndescription: Article 5: prohibited practices\n")

    assert blueprint.title == "EU AI Act"
    assert not blueprint.current_revision.is_valid


def test_restore_makes_a_new_revision_with_the_old_text(make_blueprint):
    blueprint = make_blueprint()
    blueprint.save_revision(VALID.replace("France", "Spain"))

    revision, created = blueprint.restore(blueprint.revisions.get(number=1))

    assert created and revision.number == 3 and revision.text == VALID


@pytest.mark.parametrize(("title", "expected"), [
    ("Capital cities", "capital-cities-2"),
    ("Égalité & Fraternité!", "egalite-fraternite"),
    ("!!!", "blueprint"),
])
def test_ids_from_titles_are_slugs_and_never_taken(make_blueprint, title, expected):
    make_blueprint(slug="capital-cities")

    assert Blueprint.unique_slug_for(title) == expected


def test_a_blueprint_without_runs_was_never_run(make_blueprint):
    assert make_blueprint().last_run() is None


def test_collections_lookup_resolves_stored_names_for_the_parser():
    ModelCollection.store("CORE", ["openai:gpt-4o-mini", " anthropic:claude-3-5-haiku-20241022 "])

    lookup = ModelCollection.lookup()

    assert lookup("CORE") == ["openai:gpt-4o-mini", "anthropic:claude-3-5-haiku-20241022"]
    assert lookup("MISSING") is None


def test_a_collection_with_a_lower_case_name_is_refused():
    with pytest.raises(ValidationError):
        ModelCollection.store("core", ["a:b"])


def test_a_blueprint_naming_a_stored_collection_gets_no_collection_warning(make_blueprint):
    text = VALID.replace("  - openai:gpt-4.1-mini", "  - FAST")
    without = make_blueprint(text, slug="without").current_revision.warning_count
    ModelCollection.store("FAST", ["openai:gpt-4.1-nano"])
    with_collection = make_blueprint(text, slug="with").current_revision.warning_count

    assert (without, with_collection) == (1, 0)
