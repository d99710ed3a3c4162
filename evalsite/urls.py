from django.urls import include, path

from evalsite import security, views

urlpatterns = [
    path("", include("blueprints.urls")),
    path("", include("runs.urls")),
    path("healthz", views.healthz, name="healthz"),
    path("signin", security.signin, name="signin"),
]

handler400 = "evalsite.views.bad_request"
handler404 = "evalsite.views.not_found"
handler500 = "evalsite.views.server_error"
