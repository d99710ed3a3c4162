from django.apps import AppConfig


class BlueprintsConfig(AppConfig):
    name = "blueprints"
    verbose_name = "Blueprints"
