"""Upstream MCP servers the admin registered, and the tools read from them, each with its approved definition.

A tool's definition is served only as a person approved it. What discovery reads later is kept beside it as a
proposed change until someone with the permission approves that too.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models.functions import Lower
from django.utils.translation import gettext_lazy as _


def validate_server_name(value: str) -> None:
    from django.apps import apps

    from mcp_expose.declare.names import server_name_problem

    problem = server_name_problem(value, (config.label for config in apps.get_app_configs()))
    if problem:
        raise ValidationError(problem, code="invalid_server_name")


def validate_upstream_url(value: str) -> None:
    from mcp_expose.core.ssrf_guard import AddressRefused, check_url

    try:
        check_url(value)
    except AddressRefused as exc:
        raise ValidationError(str(exc), code="invalid_upstream_url") from None


class UpstreamServer(models.Model):
    """Another MCP server whose tools are served here as `{name}.{tool}`."""

    class Protocol(models.TextChoices):
        AUTO = "auto", _("Ask the server (2026-07-28, else 2025-11-25)")
        MODERN = "2026-07-28", _("2026-07-28 only")
        LEGACY = "2025-11-25", _("2025-11-25 only")

    class Authentication(models.TextChoices):
        NONE = "none", _("None")
        HEADERS = "headers", _("Static headers")
        CLIENT_CREDENTIALS = "client_credentials", _("OAuth 2.1 client credentials")

    class DiscoveryState(models.TextChoices):
        QUEUED = "queued", _("queued")
        RUNNING = "running", _("running")
        DONE = "done", _("done")
        FAILED = "failed", _("failed")

    name = models.CharField(
        _("name"),
        max_length=32,
        unique=True,
        validators=[validate_server_name],
        help_text=_("Its tools are served as <name>.<tool>. Lowercase letters, digits, '_' and '-'; not an app label."),
    )
    url = models.CharField(
        _("URL"),
        max_length=2000,
        validators=[validate_upstream_url],
        help_text=_(
            "The server's MCP endpoint, https://. Checked against the SSRF guard when saved and on every connection."
        ),
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    protocol = models.CharField(_("protocol"), max_length=16, choices=Protocol.choices, default=Protocol.AUTO)
    connect_timeout = models.FloatField(_("connect timeout (s)"), default=5.0, validators=[MinValueValidator(0.1)])
    call_timeout = models.FloatField(_("call timeout (s)"), default=30.0, validators=[MinValueValidator(0.1)])
    authentication = models.CharField(
        _("authentication"), max_length=24, choices=Authentication.choices, default=Authentication.NONE
    )
    # Sealed (see `upstream.sealing`): never shown back, only replaced. A JSON object of header names to values.
    sealed_headers = models.TextField(_("headers (sealed)"), blank=True, default="", editable=False)
    # OAuth 2.1 client credentials: this deployment is the client; the token is cached per process and renewed.
    oauth_token_url = models.CharField(
        _("token endpoint"),
        max_length=2000,
        blank=True,
        validators=[validate_upstream_url],
        help_text=_("The authorization server's token endpoint, https://. Checked like the server's URL."),
    )
    oauth_client_id = models.CharField(_("client id"), max_length=200, blank=True)
    # Sealed like the headers; or "env:MCP_UPSTREAM_<NAME>", read from the environment when a token is asked for.
    sealed_client_secret = models.TextField(_("client secret (sealed)"), blank=True, default="", editable=False)
    oauth_scopes = models.CharField(
        _("scopes"), max_length=500, blank=True, help_text=_("Space-separated scopes to ask for; blank for none.")
    )
    oauth_resource = models.CharField(
        _("resource (RFC 8707)"),
        max_length=2000,
        blank=True,
        help_text=_("The resource indicator the token is asked for; blank: the server's URL."),
    )
    # What the last discovery found.
    discovered_at = models.DateTimeField(_("last discovery"), null=True, blank=True, editable=False)
    discovery_error = models.TextField(_("discovery error"), blank=True, default="", editable=False)
    diagnostics = models.JSONField(_("diagnostics"), default=list, blank=True, editable=False)
    protocol_version = models.CharField(_("protocol version"), max_length=16, blank=True, default="", editable=False)
    server_info = models.JSONField(_("server info"), default=dict, blank=True, editable=False)
    # The last *Discover now*, run as a Django task (`upstream.queued_discovery`): its state (blank: never asked
    # for), the id of its run (ours: the one the task is given), when it was queued and started, and what it
    # found ({"tools", "refused", "new", "changed", "withdrawn", "unchanged"}, or {"error"}).
    discovery_state = models.CharField(
        _("discovery state"), max_length=8, choices=DiscoveryState.choices, blank=True, default="", editable=False
    )
    discovery_task_id = models.CharField(_("discovery run"), max_length=32, blank=True, default="", editable=False)
    discovery_queued_at = models.DateTimeField(_("discovery queued at"), null=True, blank=True, editable=False)
    discovery_started_at = models.DateTimeField(_("discovery started at"), null=True, blank=True, editable=False)
    discovery_outcome = models.JSONField(_("discovery outcome"), default=dict, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("upstream server")
        verbose_name_plural = _("upstream servers")
        ordering = ["name"]
        permissions = [("discover_upstreamserver", _("Can discover an upstream server's tools"))]
        constraints = [models.UniqueConstraint(Lower("name"), name="mcp_expose_upstream_name_ci")]

    def __str__(self) -> str:
        return self.name


class UpstreamTool(models.Model):
    """One tool an upstream listed, by the upstream's own name: what was approved, and what was read since."""

    class Status(models.TextChoices):
        PENDING = "pending", _("New: waiting for approval")
        APPROVED = "approved", _("Approved")
        CHANGED = "changed", _("Approved; a change waits for approval")
        BLOCKED = "blocked", _("Blocked")
        WITHDRAWN = "withdrawn", _("No longer listed by the server")

    server = models.ForeignKey(UpstreamServer, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(_("upstream name"), max_length=64)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.PENDING)
    # The definition clients are served (ToolDefinition.as_json()), and its digest; empty until approved.
    approved = models.JSONField(_("approved definition"), null=True, blank=True)
    approved_digest = models.CharField(max_length=64, blank=True, default="")
    approved_at = models.DateTimeField(null=True, blank=True)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The definition the last discovery read, when it differs from the approved one (or nothing is approved).
    proposed = models.JSONField(_("proposed definition"), null=True, blank=True)
    proposed_digest = models.CharField(max_length=64, blank=True, default="")
    block_reason = models.TextField(_("why it is blocked"), blank=True, default="")
    first_seen = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("upstream tool")
        verbose_name_plural = _("upstream tools")
        ordering = ["server__name", "name"]
        permissions = [("approve_upstreamtool", _("Can approve upstream tool definitions"))]
        constraints = [models.UniqueConstraint("server", Lower("name"), name="mcp_expose_upstream_tool_ci")]

    def __str__(self) -> str:
        return f"{self.server.name}.{self.name}" if self.server_id else self.name

    @property
    def key(self) -> str:
        """The capability's key (and its exposure row's): by the server's identity, so a rename keeps it."""
        return upstream_key(self.server_id, self.name)

    @classmethod
    def from_db(cls, db: Any, field_names: Any, values: Any, **kwargs: Any) -> UpstreamTool:
        tool = super().from_db(db, field_names, values, **kwargs)
        tool.served_when_loaded = tool.served_state()
        return tool

    # What clients were served of this tool when it was read from the database; `signals` compares it with what
    # they are served after a save, to move the catalog revision only when that changed.
    served_when_loaded: tuple[str, str] | None = None

    def served_state(self) -> tuple[str, str] | None:
        """What clients are served of this tool, in short: the approved digest and the name it is called by."""
        if self.status in (self.Status.APPROVED, self.Status.CHANGED) and self.approved is not None:
            return self.approved_digest, self.name
        return None

    def as_served(self) -> dict[str, Any] | None:
        """The definition clients may see: the approved one, while the tool is approved (changed or not)."""
        if self.status in (self.Status.APPROVED, self.Status.CHANGED) and self.approved is not None:
            return dict(self.approved)
        return None


def upstream_key(server_id: object, tool: str) -> str:
    """By the server's primary key and the tool's name ignoring case (names are unique so): a rename of the
    server, or a tool's name now spelled in another case, keeps its exposure row."""
    return f"upstream.{server_id}.{tool.lower()}"
