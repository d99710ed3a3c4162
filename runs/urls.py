from django.urls import path

from . import api, api_compare, pairs, views

app_name = "runs"

urlpatterns = [
    path("runs/", views.run_list, name="list"),
    path("runs/start", views.start, name="start"),
    path("runs/pairs", pairs.blueprint_pairs, name="pairs-blueprint"),
    path("runs/<int:run_id>/", views.detail, name="detail"),
    path("judges/", views.judges, name="judges"),
    path("runs/<int:run_id>/heatmap", views.heatmap, name="heatmap"),
    path("runs/<int:run_id>/results", views.results, name="results"),
    path("runs/<int:run_id>/prompts/<int:prompt_index>/", views.prompt_detail, name="prompt"),
    path("runs/<int:run_id>/responses/<int:response_id>/", views.response_detail, name="response"),
    path("runs/<int:run_id>/responses/<int:response_id>/text", views.response_text, name="response-text"),
    path("runs/<int:run_id>/responses/<int:response_id>/cell", views.response_cell, name="cell"),
    path("runs/<int:run_id>/responses/<int:response_id>/calls", views.response_calls, name="calls"),
    path("runs/<int:run_id>/responses/<int:response_id>/rerun", views.rerun_response, name="rerun"),
    path("runs/<int:run_id>/responses/<int:response_id>/state", views.response_state, name="response-state"),
    path("runs/<int:run_id>/responses/<int:response_id>/annotation", views.annotate, name="annotate"),
    path("runs/<int:run_id>/responses/<int:response_id>/points/<int:position>/override", views.override,
         name="override"),
    path("runs/<int:run_id>/responses/<int:response_id>/points/<int:position>/confirm", views.confirm,
         name="confirm"),
    path("runs/<int:run_id>/pairs", pairs.run_pairs, name="pairs"),
    path("runs/<int:run_id>/compare", views.compare, name="compare"),
    path("runs/<int:run_id>/compare/<int:base_id>/diff", views.diff, name="diff"),
    path("runs/<int:run_id>/export.json", views.export_json, name="export-json"),
    path("runs/<int:run_id>/export.csv", views.export_csv, name="export-csv"),
    path("runs/<int:run_id>/results.csv", views.results_csv, name="results-csv"),
    path("runs/<int:run_id>/report.html", views.report, name="report"),
    path("runs/<int:run_id>/delete", views.delete, name="delete"),
    path("runs/<int:run_id>/rename", views.rename, name="rename"),
    # Last among runs/<id>/...: its <str:action> would match the names above.
    path("runs/<int:run_id>/<str:action>", views.control, name="control"),
    path("api/runs", api.start, name="api-start"),
    path("api/runs/<int:run_id>", api.run_detail, name="api-run"),
    path("api/runs/<int:run_id>/results", api.run_results, name="api-results"),
    path("api/runs/<int:run_id>/compare", api_compare.compare, name="api-compare"),
    path("api/runs/<int:run_id>/responses/<int:response_id>/rerun", api.response_rerun, name="api-rerun"),
    path("api/runs/<int:run_id>/responses/<int:response_id>/annotation", api.response_annotation,
         name="api-annotation"),
    path("api/runs/<int:run_id>/responses/<int:response_id>/points/<int:position>/<str:what>",
         api.point_review, name="api-point"),
    path("api/judges", api.judges, name="api-judges"),
    path("api/runs/<int:run_id>/<str:action>", api.control, name="api-control"),
]
