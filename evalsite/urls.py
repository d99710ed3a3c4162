from django.urls import include, path

from evalsite import views

urlpatterns = [
    path("", include("blueprints.urls")),
    path("", include("runs.urls")),
    path("healthz", views.healthz, name="healthz"),
]

handler404 = "evalsite.views.not_found"
