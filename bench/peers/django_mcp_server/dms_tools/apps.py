from django.apps import AppConfig


class DmsToolsConfig(AppConfig):
    name = "dms_tools"
