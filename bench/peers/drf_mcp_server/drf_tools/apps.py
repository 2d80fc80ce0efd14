from django.apps import AppConfig


class DrfToolsConfig(AppConfig):
    name = "drf_tools"
