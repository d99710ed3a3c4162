"""Issue 23: one rule for blueprint ids (and collection names) at every door, and ids stored before the rule.

The rule lives in ``blueprints.models`` (``validate_blueprint_id``): letters, digits, '-', '_' and '.', starting
with a letter or digit, at most 150 characters. The browser's forms, the API (``POST /api/runs`` with text and a
``blueprintId``, the rename endpoint), the commands (``import_blueprints``, ``run_blueprint``, ``library rename``)
and import (ids from paths) all refuse with its message and a usable id to try.

A blueprint stored before the rule (rows written here with ``QuerySet.update``, which skips every check) never
breaks a page, is shown escaped and shortened, and can be renamed or deleted in the browser: the library posts its
id in a form, so it works for ids no address can hold (``a/../b``).
"""

from __future__ import annotations

import io
import json
import re
from html import escape

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from blueprints.importing import import_files
from blueprints.models import (
    BLUEPRINT_ID_MAX_LENGTH,
    Blueprint,
    ModelCollection,
    blueprint_id_problem,
    suggest_blueprint_id,
    validate_blueprint_id,
)
from runs.models import Response, Run

from .run_support import make_offline_run  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

OFFLINE = """\
title: Offline
models: [fixtures:x]
fixtures: {responses: {p: {default: "hello world"}}}
---
- id: p
  prompt: Say hello.
  should: [$contains: hello]
"""

SCRIPT = "<script>"
XSS = "<script>alert(1)</script>"
DOTS = "a/../b"
LONG = "x" * 5000
BAD_IDS = [SCRIPT, XSS, DOTS, LONG, "no spaces", "-leading", "é", "100%", ".."]
CORPUS_IDS = [
    "table-format-sensitivity__combined-11fmts-r30-qpf5",
    "users__Varunrnair__maternal-health-information-for-ruralsemi-urban-india_50_questions",  # 85, the longest
    "a", "A.b_c-d", "x" * BLUEPRINT_ID_MAX_LENGTH,
]


def post_json(client, url, body):
    return client.post(url, data=json.dumps(body), content_type="application/json")


def refusal(value) -> str:
    with pytest.raises(ValidationError) as caught:
        validate_blueprint_id(value)
    return caught.value.messages[0]


def legacy(slug: str, **kwargs):
    """A run of a blueprint whose id is then set to ``slug`` behind every check (as before the rule)."""
    run = make_offline_run(2, **kwargs)
    Blueprint.objects.filter(pk=run.blueprint_id).update(slug=slug, title="")
    return Run.objects.select_related("blueprint").get(pk=run.pk)


# --- the rule ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("good", CORPUS_IDS)
def test_the_rule_allows_the_corpus_ids(good):
    assert blueprint_id_problem(good) is None
    validate_blueprint_id(good)


@pytest.mark.parametrize("bad", BAD_IDS + ["", "x" * (BLUEPRINT_ID_MAX_LENGTH + 1)])
def test_the_rule_refuses_naming_itself_with_a_usable_id_to_try(bad):
    message = refusal(bad)
    assert "Use letters, digits, '-', '_' and '.', starting with a letter or digit, at most 150 characters" in message
    suggestion = message.rsplit("Try '", 1)[1].rstrip("'.")
    assert blueprint_id_problem(suggestion) is None
    assert len(message) < 400  # a 5,000-character id is not quoted whole


def test_the_suggestion_is_free_and_short_enough():
    Blueprint.objects.create(slug="a__b", title="taken")
    assert suggest_blueprint_id(DOTS) == "a__b-2"
    Blueprint.objects.create(slug="x" * BLUEPRINT_ID_MAX_LENGTH, title="taken")
    assert suggest_blueprint_id(LONG) == "x" * (BLUEPRINT_ID_MAX_LENGTH - 2) + "-2"


def test_saving_a_new_or_changed_id_is_refused_but_a_stored_one_keeps_working():
    with pytest.raises(ValidationError):
        Blueprint.objects.create(slug=XSS, title="")
    blueprint = Blueprint.objects.create(slug="fine", title="")
    blueprint.slug = DOTS
    with pytest.raises(ValidationError):
        blueprint.save()
    Blueprint.objects.filter(pk=blueprint.pk).update(slug=DOTS)
    stored = Blueprint.objects.get(pk=blueprint.pk)
    revision, created = stored.save_revision(OFFLINE)  # saves the blueprint: its old id is not re-judged
    assert created and Blueprint.objects.get(pk=blueprint.pk).slug == DOTS


# --- the API -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [SCRIPT, XSS, DOTS, LONG])
def test_the_api_refuses_a_new_blueprint_id_with_the_forms_message(client, bad):
    response = post_json(client, "/api/runs", {"blueprint": OFFLINE, "blueprintId": bad})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == refusal(bad)
    assert "Use letters, digits" in body["error"] and blueprint_id_problem(body["suggestedId"]) is None
    assert not Blueprint.objects.exists() and not Run.objects.exists()

    form = client.post("/new/", {"slug": bad, "text": OFFLINE})  # the browser says the same
    assert form.status_code == 200 and escape(body["error"]) in form.content.decode()
    assert not Blueprint.objects.exists()


def test_the_api_accepts_a_corpus_id_and_says_5000_characters_for_a_long_one(client):
    ok = post_json(client, "/api/runs", {"blueprint": OFFLINE, "blueprintId": CORPUS_IDS[0]})
    assert ok.status_code == 201 and ok.json()["blueprint"] == CORPUS_IDS[0]
    long = post_json(client, "/api/runs", {"blueprint": OFFLINE, "blueprintId": LONG}).json()
    assert "5,000 characters long" in long["error"] and len(long["error"]) < 400


@pytest.mark.parametrize("value", [5, ["a"], {"a": 1}, True])
def test_the_api_refuses_a_blueprint_id_that_is_not_a_string(client, value):
    response = post_json(client, "/api/runs", {"blueprint": OFFLINE, "blueprintId": value})
    assert response.status_code == 400 and "`blueprintId` must be a string" in response.json()["error"]
    assert not Blueprint.objects.exists()


def test_the_api_still_runs_new_text_for_a_blueprint_stored_under_an_old_id(client):
    run = legacy(SCRIPT)
    response = post_json(client, "/api/runs", {"blueprint": OFFLINE, "blueprintId": SCRIPT})
    assert response.status_code == 201 and response.json()["blueprint"] == SCRIPT
    assert Blueprint.objects.get(pk=run.blueprint_id).revisions.count() == 2


def test_the_api_rename_refuses_with_the_rule_and_a_suggestion(client):
    import_files([("capitals.yml", OFFLINE, {})], via="test")
    response = post_json(client, "/api/blueprints/capitals/rename", {"id": XSS})
    assert response.status_code == 400
    assert response.json()["error"] == refusal(XSS) and response.json()["suggestedId"] == "script-alert-1__script"
    assert Blueprint.objects.filter(slug="capitals").exists()


# --- the browser's forms -----------------------------------------------------------------------------------------


def test_the_new_form_refuses_bad_ids_and_offers_the_length_to_the_browser(client):
    page = client.post("/new/", {"slug": LONG, "text": OFFLINE}).content.decode()
    assert "5,000 characters long" in page and f'maxlength="{BLUEPRINT_ID_MAX_LENGTH}"' in page
    assert "Ensure this value has at most" not in page  # one message: the rule's
    assert not Blueprint.objects.exists()
    made = client.post("/new/", {"slug": CORPUS_IDS[0], "text": OFFLINE})
    assert made.status_code == 302 and Blueprint.objects.filter(slug=CORPUS_IDS[0]).exists()


@pytest.mark.parametrize("bad", [XSS, DOTS, LONG])
def test_the_rename_form_refuses_bad_ids(client, bad):
    import_files([("capitals.yml", OFFLINE, {})], via="test")
    page = client.post("/blueprints/capitals/rename/", {"slug": bad}, follow=True).content.decode()
    assert escape(refusal(bad)) in page
    assert list(Blueprint.objects.values_list("slug", flat=True)) == ["capitals"]


def test_a_taken_id_suggests_a_free_one(client):
    import_files([("capitals.yml", OFFLINE, {}), ("other.yml", OFFLINE, {})], via="test")
    page = client.post("/blueprints/capitals/rename/", {"slug": "other"}, follow=True).content.decode()
    assert "already used by another blueprint; try &#x27;other-2&#x27;" in page


def test_the_import_conflict_form_refuses_a_bad_new_id(client):
    page = client.post("/import/conflict/", {"path": "x.yml", "text": OFFLINE, "choice": "new-id",
                                             "new_id": DOTS}).content.decode()
    assert "nothing was imported" in page and escape(refusal(DOTS)) in page
    assert not Blueprint.objects.exists()


def test_an_uploaded_file_whose_name_makes_a_bad_id_is_refused_with_a_name_to_use(client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    files = [SimpleUploadedFile("bad name!.yml", OFFLINE.encode()), SimpleUploadedFile("good.yml", OFFLINE.encode())]
    page = client.post("/import/", {"files": files}).content.decode()
    assert "not usable" in page and "Use letters, digits" in page and "bad-name" in page
    assert list(Blueprint.objects.values_list("slug", flat=True)) == ["good"]


# --- import (ids from paths) -------------------------------------------------------------------------------------


def test_import_refuses_paths_whose_ids_break_the_rule_and_keeps_the_rest():
    deep = "/".join(["folder-with-a-long-name"] * 7) + "/suite.yml"  # 170 characters once the '/' are '__'
    nested = f"{CORPUS_IDS[1].replace('__', '/')}.yml"  # the corpus's longest id, from its path
    outcome = import_files([("ok.yml", OFFLINE, {}), ("bad name!.yml", OFFLINE, {}), (deep, OFFLINE, {}),
                            (nested, OFFLINE, {})], via="test")
    status = {item.name: item for item in outcome.items}
    assert status["ok.yml"].status == "created" and status[nested].status == "created"
    assert status["bad name!.yml"].status == "refused" and "'bad-name'" in status["bad name!.yml"].message
    assert status[deep].status == "refused" and "at most 150" in status[deep].message
    assert sorted(Blueprint.objects.values_list("slug", flat=True)) == sorted(["ok", CORPUS_IDS[1]])


def test_a_chosen_id_on_a_conflict_goes_through_the_rule():
    outcome = import_files([("x.yml", OFFLINE, {})], via="test", choices={"x.yml": f"id:{XSS}"})
    assert outcome.items[0].status == "refused" and "Use letters, digits" in outcome.items[0].message
    assert not Blueprint.objects.exists()


# --- the commands ------------------------------------------------------------------------------------------------


def test_import_blueprints_refuses_bad_ids_and_long_collection_names(tmp_path):
    (tmp_path / "good.yml").write_text(OFFLINE)
    (tmp_path / "bad name!.yml").write_text(OFFLINE)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / ("C" * 120 + ".json")).write_text('["openai:gpt-4o-mini"]')
    (tmp_path / "models" / "CORE.json").write_text('["openai:gpt-4o-mini"]')
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("import_blueprints", str(tmp_path), stdout=out, stderr=err)
    assert exit_.value.code == 1
    assert "bad name!.yml: refused" in err.getvalue() and "Use letters, digits" in err.getvalue()
    assert "at most 100 characters" in out.getvalue()
    assert list(Blueprint.objects.values_list("slug", flat=True)) == ["good"]
    assert list(ModelCollection.objects.values_list("name", flat=True)) == ["CORE"]


def test_run_blueprint_refuses_a_file_whose_name_makes_a_bad_id(tmp_path):
    path = tmp_path / "bad name!.yml"
    path.write_text(OFFLINE)
    err = io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("run_blueprint", str(path), stdout=io.StringIO(), stderr=err)
    assert exit_.value.code == 2 and "cannot run" in err.getvalue() and "Use letters, digits" in err.getvalue()
    assert not Blueprint.objects.exists()


@pytest.mark.parametrize("bad", [XSS, DOTS, LONG])
def test_library_rename_refuses_bad_ids(bad):
    import_files([("capitals.yml", OFFLINE, {})], via="test")
    with pytest.raises(CommandError) as caught:
        call_command("library", "rename", "blueprint", "capitals", bad, stdout=io.StringIO())
    assert str(caught.value) == refusal(bad)
    assert list(Blueprint.objects.values_list("slug", flat=True)) == ["capitals"]


def test_library_renames_and_lists_a_stored_bad_id():
    run = legacy(DOTS)
    out = io.StringIO()
    call_command("library", "list", "blueprints", stdout=out)
    assert "id not usable: rename it, e.g. to a__b" in out.getvalue()
    call_command("library", "rename", "blueprint", DOTS, "a__b", stdout=io.StringIO())
    assert Blueprint.objects.get(pk=run.blueprint_id).slug == "a__b"


def test_collection_names_have_the_rule_and_a_length_at_every_door(client):
    ModelCollection.store("CORE", ["openai:gpt-4o-mini"])
    with pytest.raises(CommandError, match="at most 100 characters"):
        call_command("library", "rename", "collection", "CORE", "C" * 5000, stdout=io.StringIO())
    api = post_json(client, "/api/collections/CORE/rename", {"name": "C" * 5000})
    assert api.status_code == 400 and "at most 100 characters" in api.json()["error"]
    page = client.post("/collections/", {"name": "C" * 5000, "models": "openai:x"}).content.decode()
    assert "at most 100 characters" in page
    assert list(ModelCollection.objects.values_list("name", flat=True)) == ["CORE"]


# --- ids stored before the rule ----------------------------------------------------------------------------------


_ADDRESSES = re.compile(r'\s(?:href|action|value|hx-get|hx-post|formaction)="[^"]*"')


def _assert_safe(page, bad, *, short=True):
    """The page renders, never holds the id as markup, and shows a long one shortened (only addresses and the
    forms' hidden fields hold it whole)."""
    assert page.status_code == 200, page.status_code
    html = page.content.decode()
    assert "<script>alert(1)" not in html and "<script></" not in html and "<script>\n" not in html
    if short:
        assert "x" * 301 not in _ADDRESSES.sub("", html)
    return html


@pytest.mark.parametrize("bad", [SCRIPT, XSS, DOTS, LONG, "..", "100% ?#"])
def test_a_stored_bad_id_breaks_no_page_and_is_shown_escaped_and_short(client, bad):
    run = legacy(bad)
    library = _assert_safe(client.get("/"), bad)
    assert "id not usable" in library and 'name="action" value="delete"' in library
    if bad in (SCRIPT, XSS):
        assert escape(bad, quote=False)[:60] in library
    if bad == LONG:
        assert "x" * 79 + "…</code>" in library
    # The runs app's pages render and escape it; they show ids whole (their templates are the runs app's).
    _assert_safe(client.get("/runs/"), bad, short=False)
    _assert_safe(client.get("/runs/", {"blueprint": bad}), bad, short=False)
    _assert_safe(client.get(f"/runs/{run.pk}/heatmap"), bad, short=False)
    _assert_safe(client.get(f"/runs/{run.pk}/prompts/0/"), bad, short=False)
    blueprint = Blueprint.objects.get(pk=run.blueprint_id)
    if blueprint.has_pages:  # its own pages, with the rename form offering a usable id
        detail = _assert_safe(client.get(blueprint.get_absolute_url()), bad)
        assert "stored before ids were checked" in detail and blueprint.suggested_id in detail
        for what in ("edit/", "history/", "delete/", "try/", "revisions/1/"):
            _assert_safe(client.get(blueprint.get_absolute_url() + what), bad)


@pytest.mark.parametrize("bad", [SCRIPT, LONG, "100% ?#"])
def test_the_run_page_of_a_stored_bad_id_renders(client, bad):
    run = legacy(bad)
    _assert_safe(client.get(f"/runs/{run.pk}/"), bad, short=False)  # the runs templates do not shorten ids


@pytest.mark.parametrize("bad", [XSS, DOTS])
def test_the_run_page_of_a_stored_id_with_a_slash_renders(client, bad):
    run = legacy(bad)
    _assert_safe(client.get(f"/runs/{run.pk}/"), bad)


@pytest.mark.parametrize("bad", [SCRIPT, XSS, DOTS, LONG])
def test_a_stored_bad_id_is_deleted_from_the_library_after_asking(client, bad):
    run = legacy(bad)
    ask = client.post("/", {"action": "delete", "id": bad})
    html = _assert_safe(ask, bad)
    assert "Delete the blueprint and its runs" in html and 'name="confirm" value="yes"' in html
    assert Blueprint.objects.filter(pk=run.blueprint_id).exists()  # asking deletes nothing

    done = client.post("/", {"action": "delete", "id": bad, "confirm": "yes"}, follow=True)
    assert "Deleted the blueprint" in _assert_safe(done, bad)
    assert not Blueprint.objects.filter(pk=run.blueprint_id).exists()
    assert not Run.objects.filter(pk=run.pk).exists() and not Response.objects.filter(run_id=run.pk).exists()


@pytest.mark.parametrize("bad", [SCRIPT, XSS, DOTS, LONG])
def test_a_stored_bad_id_is_renamed_from_the_library(client, bad):
    run = legacy(bad)
    suggested = Blueprint.objects.get(pk=run.blueprint_id).suggested_id
    refused = client.post("/", {"action": "rename", "id": bad, "new_id": "still bad!"}, follow=True)
    assert "keeps its id" in _assert_safe(refused, bad)
    renamed = client.post("/", {"action": "rename", "id": bad, "new_id": suggested}, follow=True)
    assert renamed.status_code == 200 and renamed.request["PATH_INFO"] == f"/blueprints/{suggested}/"
    assert Blueprint.objects.get(pk=run.blueprint_id).slug == suggested
    assert client.get(f"/runs/{run.pk}/").status_code == 200


def test_a_stored_bad_id_with_pages_is_renamed_and_deleted_through_them(client):
    run = legacy(SCRIPT)
    blueprint = Blueprint.objects.get(pk=run.blueprint_id)
    assert client.post(blueprint.get_absolute_url() + "rename/", {"slug": "scripted"}).status_code == 302
    assert Blueprint.objects.get(pk=run.blueprint_id).slug == "scripted"
    Blueprint.objects.filter(pk=run.blueprint_id).update(slug=LONG)
    blueprint.refresh_from_db()
    assert client.post(blueprint.get_absolute_url() + "delete/").status_code == 302
    assert not Blueprint.objects.exists()


def test_the_library_refuses_an_unknown_id_or_action(client):
    page = client.post("/", {"action": "delete", "id": LONG}, follow=True).content.decode()
    assert "There is no blueprint with the id" in page and "x" * 100 not in page


@pytest.mark.parametrize("bad", ["A/B", "<B>", "C" * 5000])
def test_a_stored_bad_collection_name_breaks_no_page_and_can_be_renamed_or_deleted(client, bad):
    ModelCollection.objects.bulk_create([ModelCollection(name=bad, models=["openai:x"]),
                                         ModelCollection(name="KEEP", models=[])])
    page = client.get("/collections/")
    html = page.content.decode()
    assert page.status_code == 200 and "<B>" not in html and "C" * 301 not in _ADDRESSES.sub("", html)
    renamed = client.post("/collections/", {"action": "rename", "name": bad, "new_name": "fixed"}, follow=True)
    assert renamed.status_code == 200 and ModelCollection.objects.filter(name="FIXED").exists()
    gone = client.post("/collections/", {"action": "delete", "name": "FIXED"}, follow=True)
    assert gone.status_code == 200
    assert list(ModelCollection.objects.values_list("name", flat=True)) == ["KEEP"]
