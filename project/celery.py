"""The demo's Celery app: MCP tasks on Celery, through django-tasks-celery (Django 6.0+, Python 3.12+).

    DEMO_TASKS=celery celery -A project worker --pool threads      # the worker
    DEMO_TASKS=celery python manage.py demo                         # the server, queueing on Redis

Redis (as `scripts/services` starts it) is the broker. The Django task that runs MCP tasks registers itself
with Celery when its module is imported, which the worker does at start (`imports`).
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.imports = ("mcp_expose.serving.task_worker",)
