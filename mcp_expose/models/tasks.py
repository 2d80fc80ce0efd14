"""A tool call that runs as an MCP task (the io.modelcontextprotocol/tasks extension): its owner, what it
runs with, where it stands, and its result. Any process answers tasks/get from this row."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from mcp_expose.core.task_states import ACTIVE, TaskRun, TaskStatus


def new_task_id() -> str:
    """An unguessable id (192 random bits): a task id may be all that stands between a task and a stranger."""
    return secrets.token_urlsafe(24)


class ToolTask(models.Model):
    Status = TaskStatus
    Run = TaskRun
    ACTIVE = ACTIVE

    id = models.CharField(primary_key=True, max_length=64, default=new_task_id, editable=False)
    tool_name = models.CharField(_("tool"), max_length=128)
    tool_key = models.CharField(_("tool key"), max_length=200, db_index=True)
    # Who may read, answer and cancel it: the same API key, or the same OAuth client for the same user.
    owner = models.CharField(_("owner key"), max_length=200, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("user"), null=True, blank=True, on_delete=models.CASCADE
    )
    # The principal the worker runs it as (no secret: the credential is looked up again by id).
    credential_method = models.CharField(_("credential"), max_length=20)
    api_key_id = models.BigIntegerField(null=True, blank=True)
    client_id = models.CharField(max_length=200, blank=True)
    # The OAuth access token last presented for it (its id only): revoking the grant stops the task's next run.
    access_token_id = models.BigIntegerField(null=True, blank=True)
    scopes = models.JSONField(default=list)
    # What the call came with: arguments, the headers a tool may see, the agent chain, the client's declared
    # capabilities, and the answers it gave so far (the state of the questions asked).
    call = models.JSONField(default=dict)
    status = models.CharField(_("status"), max_length=20, choices=Status.choices, default=Status.WORKING)
    run = models.CharField(_("run"), max_length=10, choices=Run.choices, default=Run.QUEUED)
    status_message = models.CharField(_("status message"), max_length=500, blank=True)
    # The pending questions (inputRequests) while input_required, keyed as the client sees them.
    input_requests = models.JSONField(null=True, blank=True)
    # The tools/call result (completed) or the JSON-RPC error (failed), exactly as a direct call's.
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(_("last updated"), auto_now=True)
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True, db_index=True)

    class Meta:
        verbose_name = _("task")
        verbose_name_plural = _("tasks")
        ordering = ["-created_at"]
        permissions = [("cancel_tooltask", "Can cancel a running MCP task")]
        indexes = [models.Index(fields=["owner", "status"], name="mcp_expose_task_owner_status")]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.get_status_display()})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def error_message(self) -> str:
        """What went wrong, for people: the JSON-RPC error's message, or the tool error's text."""
        if isinstance(self.error, dict):
            return str(self.error.get("message", ""))
        if isinstance(self.result, dict) and self.result.get("isError"):
            content = self.result.get("content") or [{}]
            return str(content[0].get("text", ""))[:500]
        return ""
