"""A task's fields on the wire (SEP-2663): flat on the `CreateTaskResult` a call answers with, and with its
pending questions, result or error on tasks/get."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from mcp_expose.calls.tasks import TaskView


def created_result(view: TaskView) -> dict[str, Any]:
    """The `CreateTaskResult` a call answers with: the task's fields, flat."""
    return {"resultType": "task", **_task_fields(view)}


def detailed_task(view: TaskView) -> dict[str, Any]:
    """The task as tasks/get returns it: with its pending questions, its result or its error."""
    fields = _task_fields(view)
    if view.input_requests is not None:
        fields["inputRequests"] = dict(view.input_requests)
    if view.result is not None:
        fields["result"] = dict(view.result)
    if view.error is not None:
        fields["error"] = dict(view.error)
    return fields


def _task_fields(view: TaskView) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "taskId": view.task_id,
        "status": view.status,
        "createdAt": _timestamp(view.created_at),
        "lastUpdatedAt": _timestamp(view.updated_at),
        "ttlMs": view.ttl_seconds * 1000 if view.ttl_seconds is not None else None,
        "pollIntervalMs": max(1, round(view.poll_interval * 1000)),
    }
    if view.status_message:
        fields["statusMessage"] = view.status_message
    return fields


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
