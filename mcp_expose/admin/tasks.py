"""MCP tasks in the admin: who started which tool, where it stands, how long it took, and what went wrong.

Written by the server and its workers, never by hand. An operator with the "cancel" permission may cancel
tasks still working or waiting for input (the worker stops at its next heartbeat); the action is a POST of
the changelist form, so Django's CSRF protection covers it."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from mcp_expose.admin.records import ReadOnlyAdmin
from mcp_expose.calls import tasks
from mcp_expose.models import ToolTask


@admin.register(ToolTask)
class ToolTaskAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "tool_name", "user", "credential_method", "status", "took", "status_message"]
    list_filter = ["status", "tool_name", "credential_method", "created_at"]
    search_fields = ["tool_name", "user__username", "client_id", "id"]
    date_hierarchy = "created_at"
    actions = ["cancel_selected"]
    # The call's arguments, headers and answers stay with the server: an operator sees what and who, not the data.
    exclude = ["call"]
    readonly_fields = [
        "id",
        "tool_name",
        "tool_key",
        "user",
        "credential_method",
        "api_key_id",
        "client_id",
        "scopes",
        "status",
        "run",
        "status_message",
        "error_text",
        "input_requests",
        "result",
        "created_at",
        "started_at",
        "finished_at",
        "heartbeat_at",
        "expires_at",
    ]

    @admin.display(description=_("took"))
    def took(self, task: ToolTask) -> str:
        if task.started_at is None or task.finished_at is None:
            return "-"
        return f"{(task.finished_at - task.started_at).total_seconds():.1f} s"

    @admin.display(description=_("error"))
    def error_text(self, task: ToolTask) -> str:
        return task.error_message or "-"

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("mcp_expose.cancel_tooltask"))

    @admin.action(description=_("Cancel selected tasks"), permissions=["cancel"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[ToolTask]) -> None:
        cancelled = 0
        for task in queryset.filter(status__in=ToolTask.ACTIVE):
            if tasks.cancel(task):
                self.log_change(request, task, [{"changed": {"fields": ["status"]}}])
                cancelled += 1
        self.message_user(
            request,
            ngettext("%(count)d task cancelled.", "%(count)d tasks cancelled.", cancelled) % {"count": cancelled},
            messages.SUCCESS,
        )

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).select_related("user")
