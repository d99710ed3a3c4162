from django.urls import path

from blueprints import views

app_name = "blueprints"
urlpatterns = [
    path("", views.home, name="home"),
]
