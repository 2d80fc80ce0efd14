"""Where an MCP task stands: its status on the wire, and where its run is. Choices, not models, so that code
imported before Django's apps are ready (the serving layer) can name them."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class TaskStatus(models.TextChoices):
    WORKING = "working", _("working")
    INPUT_REQUIRED = "input_required", _("input required")
    COMPLETED = "completed", _("completed")
    FAILED = "failed", _("failed")
    CANCELLED = "cancelled", _("cancelled")


class TaskRun(models.TextChoices):
    """Where a working task is in its worker's hands."""

    QUEUED = "queued", _("queued")
    RUNNING = "running", _("running")
    IDLE = "idle", _("idle")


# The statuses a task can still leave: working, or waiting for the client.
ACTIVE = (TaskStatus.WORKING.value, TaskStatus.INPUT_REQUIRED.value)
