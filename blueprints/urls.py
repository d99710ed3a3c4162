from django.urls import path, register_converter

from blueprints import api, views
from blueprints.models import BLUEPRINT_ID_RE


class BlueprintIdConverter:
    regex = BLUEPRINT_ID_RE

    def to_python(self, value):
        return value

    def to_url(self, value):
        return value


register_converter(BlueprintIdConverter, "bpid")

app_name = "blueprints"
urlpatterns = [
    path("", views.home, name="home"),
    path("examples/", views.add_examples, name="add_examples"),
    path("new/", views.new_blueprint, name="new"),
    path("import/", views.import_blueprints, name="import"),
    path("import/conflict/", views.import_conflict, name="import-conflict"),
    path("validate/", views.validate, name="validate"),
    path("collections/", views.collections, name="collections"),
    path("collections/<str:name>/delete/", views.collection_delete, name="collection-delete"),
    path("collections/<str:name>/rename/", views.collection_rename, name="collection-rename"),
    path("blueprints/<bpid:slug>/", views.detail, name="detail"),
    path("blueprints/<bpid:slug>/edit/", views.edit, name="edit"),
    path("blueprints/<bpid:slug>/try/", views.try_response, name="try"),
    path("blueprints/<bpid:slug>/rename/", views.rename, name="rename"),
    path("blueprints/<bpid:slug>/delete/", views.delete, name="delete"),
    path("blueprints/<bpid:slug>/history/", views.history, name="history"),
    path("blueprints/<bpid:slug>/revisions/<int:number>/", views.revision, name="revision"),
    path("blueprints/<bpid:slug>/revisions/<int:number>/restore/", views.restore, name="restore"),
    # Any stored id, even one that could not be made today, can be read and removed through the API.
    path("api/blueprints/<str:slug>", api.blueprint_detail, name="api-blueprint"),
    path("api/blueprints/<str:slug>/rename", api.blueprint_rename, name="api-blueprint-rename"),
    path("api/collections/<str:name>", api.collection_detail, name="api-collection"),
    path("api/collections/<str:name>/rename", api.collection_rename, name="api-collection-rename"),
]
