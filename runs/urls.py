from django.urls import path

from . import api, views

app_name = "runs"

urlpatterns = [
    path("runs/start", views.start, name="start"),
    path("runs/<int:run_id>/", views.detail, name="detail"),
    path("runs/<int:run_id>/<str:action>", views.control, name="control"),
    path("api/runs", api.start, name="api-start"),
    path("api/runs/<int:run_id>", api.run_detail, name="api-run"),
    path("api/runs/<int:run_id>/results", api.run_results, name="api-results"),
    path("api/runs/<int:run_id>/<str:action>", api.control, name="api-control"),
]
