"""The usage log: a row per tool call, and a count per hour of tools/list calls."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class ToolCall(models.Model):
    """One row per tools/call, whatever its outcome: who called what, how it went, how fast."""

    class Outcome(models.TextChoices):
        OK = "ok", _("ok")
        INVALID_INPUT = "invalid_input", _("invalid input")
        PERMISSION_DENIED = "permission_denied", _("permission denied")
        NOT_FOUND = "not_found", _("not found")
        CONFLICT = "conflict", _("conflict")
        RATE_LIMITED = "rate_limited", _("rate limited")
        TIMEOUT = "timeout", _("timeout")
        CANCELLED = "cancelled", _("cancelled")
        CONFIRMATION_REQUIRED = "confirmation_required", _("confirmation required")
        INPUT_REQUIRED = "input_required", _("waiting for the client's answers")
        DECLINED = "declined", _("declined")
        UNKNOWN_TOOL = "unknown_tool", _("unknown tool")
        TOOL_ERROR = "tool_error", _("tool error")
        INTERNAL = "internal", _("internal error")

    created_at = models.DateTimeField(_("time"), default=timezone.now, db_index=True)
    # Looked up through the (tool_name, created_at) index below, whose leading column it is.
    tool_name = models.CharField(_("tool"), max_length=64)
    tool_key = models.CharField(_("capability"), max_length=200, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("user"),
    )
    username = models.CharField(_("username"), max_length=150, blank=True)
    auth_method = models.CharField(_("authenticated by"), max_length=20)
    client_id = models.CharField(_("OAuth client"), max_length=255, blank=True, db_index=True)
    api_key_prefix = models.CharField(_("API key"), max_length=16, blank=True)
    scopes = models.CharField(_("scopes"), max_length=1000, blank=True)
    outcome = models.CharField(_("outcome"), max_length=30, choices=Outcome.choices, db_index=True)
    error_code = models.CharField(_("error code"), max_length=50, blank=True)
    incident = models.CharField(_("incident"), max_length=32, blank=True)
    duration_ms = models.FloatField(_("duration (ms)"))
    argument_bytes = models.PositiveIntegerField(_("argument size"), default=0)
    result_bytes = models.PositiveIntegerField(_("result size"), default=0)
    argument_keys = models.JSONField(_("argument keys"), default=list)
    argument_values = models.JSONField(_("argument values"), null=True, blank=True)
    depth = models.PositiveSmallIntegerField(_("agent depth"), default=0)
    conversation_id = models.CharField(_("conversation"), max_length=128, blank=True, db_index=True)
    protocol_version = models.CharField(_("protocol"), max_length=20, blank=True)
    # Given to the call's record when it is made, so that writing the row again (a retry after a commit whose
    # answer was lost, a spill file replayed twice) adds nothing. Rows written before it existed have none.
    row_id = models.UUIDField(_("row id"), null=True, blank=True, unique=True, editable=False)

    class Meta:
        verbose_name = _("tool call")
        verbose_name_plural = _("tool calls")
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tool_name", "created_at"])]

    def __str__(self) -> str:
        return f"{self.tool_name} by {self.username or self.auth_method}: {self.outcome}"


class ListingCount(models.Model):
    """tools/list calls in one hour, added to in the database by each process's tally: one UPDATE adds
    atomically whichever processes flush at once, and a row is neither evicted nor expired, as a cache
    counter is (the file and database caches add by reading then writing, which loses what another
    process added meanwhile and resets the key's expiry to the cache's default timeout)."""

    hour = models.DateTimeField(_("hour"), unique=True)
    calls = models.PositiveBigIntegerField(_("tools/list calls"), default=0)

    class Meta:
        verbose_name = _("tools/list calls per hour")
        verbose_name_plural = _("tools/list calls per hour")

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00}: {self.calls}"
