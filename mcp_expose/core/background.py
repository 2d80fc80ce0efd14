"""Django's Tasks framework, wherever it comes from: `django.tasks` (Django 6.0+) or the `django-tasks`
backport (Django 5.2). Everything here that enqueues or declares background work imports it from this module."""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

if find_spec("django.tasks") is not None:  # Django 6.0+
    from django.tasks import task, task_backends
else:  # Django 5.2, with the backport
    from django_tasks import task, task_backends  # type: ignore[no-redef,import-not-found,assignment,unused-ignore]

__all__ = ["backend_named", "task", "task_backends"]


def backend_named(alias: str) -> Any:
    """The configured backend `alias` (settings.TASKS); `InvalidTaskBackend` when there is none."""
    return task_backends[alias]
