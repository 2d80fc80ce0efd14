"""Calls waiting for a person to approve them on the approval page."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class Confirmation(models.Model):
    """A human's yes or no to one call, asked through the client (elicitation) or an approval page.

    Single use: a confirmation moves from pending to approved or declined, and an
    approved one to consumed when the call runs, each move one conditional UPDATE,
    so a replay finds nothing to move.
    """

    class Channel(models.TextChoices):
        ELICITATION = "elicitation", _("client form")
        APPROVAL_PAGE = "approval_page", _("approval page")

    class Status(models.TextChoices):
        PENDING = "pending", _("pending")
        APPROVED = "approved", _("approved")
        DECLINED = "declined", _("declined")
        EXPIRED = "expired", _("expired")
        CONSUMED = "consumed", _("used")
        CLOSED = "closed", _("answered")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    channel = models.CharField(_("channel"), max_length=20, choices=Channel.choices)
    status = models.CharField(_("status"), max_length=20, choices=Status.choices, default=Status.PENDING)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_confirmations", verbose_name=_("user")
    )
    caller = models.CharField(_("caller"), max_length=200, help_text=_("The principal that asked, secret-free."))
    tool_key = models.CharField(_("capability"), max_length=200)
    tool_name = models.CharField(_("tool"), max_length=64)
    summary = models.TextField(_("what will happen"))
    arguments = models.JSONField(_("arguments"), default=dict)
    arguments_digest = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(_("asked"), auto_now_add=True)
    expires_at = models.DateTimeField(_("expires"))
    decided_at = models.DateTimeField(_("decided"), null=True, blank=True)
    used_at = models.DateTimeField(_("used"), null=True, blank=True)

    class Meta:
        verbose_name = _("confirmation")
        verbose_name_plural = _("confirmations")
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["user", "tool_key", "arguments_digest", "status"])]

    def __str__(self) -> str:
        return f"{self.tool_name} for {self.user} ({self.get_status_display()})"

    @property
    def is_expired(self) -> bool:
        return self.expires_at <= timezone.now()
