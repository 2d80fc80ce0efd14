from django.apps import AppConfig


class DsmToolsConfig(AppConfig):
    name = "dsm_tools"
