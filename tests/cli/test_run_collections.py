"""One rule for collections from every door: a file's own models/ folder first, then the collections stored in
evalsite (run_blueprint FILE, validate_blueprint, the blueprint page and its run form, the start of a run); a file
stored by run_blueprint keeps the collection files it came with, so its page resolves them as its file did."""

import io
import json
import re

import pytest
from django.core.management import call_command

from blueprints.models import Blueprint, ModelCollection
from runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)

WALK = ("title: Walk\nmodels: [WALK4]\nfixtures: {responses: {p: {default: hello}}}\n---\n"
        "- id: p\n  prompt: Say hello.\n  should: [$contains: hello]\n")


def run_form(client, slug: str) -> str:
    """The blueprint page's run form (or the fragment the page loads it from, where it has one)."""
    page = client.get(f"/blueprints/{slug}/").text
    form = page.split('<section id="run-form"')[1].split("</section>")[0]
    loaded = re.search(r'hx-get="(/runs/form/[^"]+)"', form)
    return client.get(loaded.group(1)).text if loaded else form


def run_blueprint(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("run_blueprint", *map(str, args), stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


def test_run_blueprint_file_runs_a_collection_stored_in_evalsite(tmp_path):
    ModelCollection.store("WALK4", ["fixtures:a", "fixtures:b"], source="edited in evalsite")
    path = tmp_path / "walk.yml"
    path.write_text(WALK)

    code, out, err = run_blueprint(path)

    assert code == 0, err
    assert "fixtures:a[temp:0]  1.000" in out and "fixtures:b[temp:0]  1.000" in out
    assert Run.objects.get().resolved_models == ["fixtures:a", "fixtures:b"]


def test_a_dry_run_resolves_a_stored_collection_too(tmp_path):
    ModelCollection.store("WALK4", ["fixtures:a", "fixtures:b"])
    path = tmp_path / "walk.yml"
    path.write_text(WALK)

    code, out, err = run_blueprint(path, "--dry-run")

    assert code == 0, err
    assert "(2 responses)" in out and "2 from fixtures" in out


def test_a_files_own_models_folder_wins_over_the_stored_collection(tmp_path):
    ModelCollection.store("WALK4", ["fixtures:stored"])
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "WALK4.json").write_text('["fixtures:own"]')
    (tmp_path / "evals").mkdir()
    path = tmp_path / "evals" / "walk.yml"
    path.write_text(WALK)

    code, _, err = run_blueprint(path)
    validated = io.StringIO()
    call_command("validate_blueprint", str(path), stdout=validated)

    assert code == 0, err
    assert Run.objects.get().resolved_models == ["fixtures:own"]
    assert "OK (1 prompt, 1 point, 1 model)" in validated.getvalue()


def test_an_unknown_collection_still_stops_run_blueprint_with_both_places_named(tmp_path):
    path = tmp_path / "walk.yml"
    path.write_text(WALK)

    code, _, err = run_blueprint(path)

    assert code == 2
    assert "unknown model collection: WALK4" in err and "models/WALK4.json beside the blueprint" in err


def test_the_run_form_of_a_blueprint_stored_by_run_blueprint_uses_the_collections_its_file_came_with(tmp_path,
                                                                                                     client):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "WALK4.json").write_text('["fixtures:a", "fixtures:b"]')
    (tmp_path / "models" / "OTHER.json").write_text('["fixtures:c"]')  # not named: not kept
    (tmp_path / "blueprints").mkdir()
    path = tmp_path / "blueprints" / "walk.yml"
    path.write_text(WALK)

    assert run_blueprint(path)[0] == 0
    blueprint = Blueprint.objects.get(slug="walk")
    assert not ModelCollection.objects.exists()  # nothing stored on the Collections page
    assert blueprint.current_revision.files == {"../models/WALK4.json": '["fixtures:a", "fixtures:b"]'}

    form = run_form(client, "walk")
    assert "is not known" not in form and "unknown model collection" not in form
    assert 'name="models" value="fixtures:a"' in form and 'name="models" value="fixtures:b"' in form

    client.post("/runs/start", {"blueprint": "walk", "revision": "1", "models": ["fixtures:a", "fixtures:b"]})
    api = client.post("/api/runs", json.dumps({"blueprintId": "walk"}), content_type="application/json")
    assert api.status_code < 300, api.content
    assert [run.resolved_models for run in Run.objects.order_by("pk")] == [["fixtures:a", "fixtures:b"]] * 3


def test_a_changed_collection_file_makes_a_new_revision_and_the_page_follows_it(tmp_path, client):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "WALK4.json").write_text('["fixtures:a"]')
    path = tmp_path / "walk.yml"
    path.write_text(WALK)
    assert run_blueprint(path)[0] == 0

    (tmp_path / "models" / "WALK4.json").write_text('["fixtures:a", "fixtures:b"]')
    code, _, err = run_blueprint(path)

    assert code == 0, err
    blueprint = Blueprint.objects.get(slug="walk")
    assert blueprint.revisions.count() == 2
    assert Run.objects.order_by("pk").last().resolved_models == ["fixtures:a", "fixtures:b"]
    assert 'name="models" value="fixtures:b"' in run_form(client, "walk")


def test_run_blueprint_on_a_file_of_an_imported_folder_runs_the_folders_blueprint(tmp_path):
    """import_blueprints gives suite/geo/walk.yml the id geo__walk; run_blueprint alone would call it walk (no
    blueprints/ folder above it): the same text finds its blueprint, and it is said."""
    (tmp_path / "suite" / "geo").mkdir(parents=True)
    (tmp_path / "suite" / "models").mkdir()
    (tmp_path / "suite" / "models" / "WALK4.json").write_text('["fixtures:a"]')
    path = tmp_path / "suite" / "geo" / "walk.yml"
    path.write_text(WALK)
    call_command("import_blueprints", str(tmp_path / "suite"), stdout=io.StringIO())

    code, _, err = run_blueprint(path)

    assert code == 0, err
    assert list(Blueprint.objects.values_list("slug", flat=True)) == ["geo__walk"]
    assert "walk.yml -> geo__walk: unchanged; the same text as 'geo__walk' (imported from 'geo/walk.yml')" in err
    assert Run.objects.get().blueprint.slug == "geo__walk"
    assert Blueprint.objects.get().revisions.count() == 1  # the folder's revision kept its collection file too


def test_a_blueprint_stored_before_collection_files_were_kept_is_unchanged_while_they_agree(tmp_path):
    ModelCollection.store("WALK4", ["fixtures:a"])
    Blueprint.objects.create(slug="walk", title="").save_revision(WALK, summary="imported before")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "WALK4.json").write_text('["fixtures:a"]')
    path = tmp_path / "walk.yml"
    path.write_text(WALK)

    same = run_blueprint(path)
    (tmp_path / "models" / "WALK4.json").write_text('["fixtures:b"]')
    changed = run_blueprint(path)

    assert same[0] == 0 and changed[0] == 0, changed[2]
    revisions = Blueprint.objects.get(slug="walk").revisions.order_by("number")
    assert [r.files for r in revisions] == [{}, {"models/WALK4.json": '["fixtures:b"]'}]
    assert [run.resolved_models for run in Run.objects.order_by("pk")] == [["fixtures:a"], ["fixtures:b"]]
