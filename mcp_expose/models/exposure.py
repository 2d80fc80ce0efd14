"""What is exposed: the admin's row per capability, and its decisions as plain data for the catalog."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models.functions import Lower
from django.utils.translation import gettext_lazy as _
from oauth2_provider.settings import oauth2_settings

from mcp_expose.core.endpoints import parse_tags
from mcp_expose.declare.exposure_state import ExposureState
from mcp_expose.declare.names import split_scopes
from mcp_expose.declare.registry import APPROVAL_PAGE_CHANNEL, CLIENT_CHANNEL
from mcp_expose.models.validators import (
    validate_rate_limit,
    validate_scopes,
    validate_tags,
    validate_wire_name,
)


class ConfirmationChannel(models.TextChoices):
    """Where a person confirms a call (the values of `registry.ConfirmationChannel`)."""

    CLIENT = CLIENT_CHANNEL, _("the client")
    APPROVAL_PAGE = APPROVAL_PAGE_CHANNEL, _("approval page, signed in")


class ExposedTool(models.Model):
    """Whether and how one declared capability is offered over MCP.

    Rows are created from the declarations (on migrate and by `mcp_sync`); an
    administrator narrows or switches them off. Rows whose capability left the
    code are kept, marked stale, and never served.
    """

    key = models.CharField(
        _("capability"), max_length=200, unique=True, help_text=_("Identity of the declaration: app_label.name.")
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    wire_name = models.CharField(
        _("tool name"),
        max_length=64,
        blank=True,
        validators=[validate_wire_name],
        help_text=_("Name clients see. Leave blank to use the name declared in code."),
    )
    title = models.CharField(_("title"), max_length=200, blank=True, help_text=_("Overrides the declared title."))
    description = models.TextField(
        _("description"), blank=True, help_text=_("Overrides the declared description (the docstring).")
    )
    extra_scopes = models.CharField(
        _("extra scopes"),
        max_length=500,
        blank=True,
        validators=[validate_scopes],
        help_text=_("Space-separated scopes required in addition to those declared in code."),
    )
    allowed_clients = models.ManyToManyField(
        oauth2_settings.APPLICATION_MODEL,
        blank=True,
        related_name="+",
        verbose_name=_("allowed OAuth clients"),
        help_text=_("If any are chosen, only these OAuth clients may see and call the tool (API keys may not)."),
    )
    requires_confirmation = models.BooleanField(
        _("requires confirmation"),
        default=False,
        help_text=_("Ask a human before every call (tools that require it in code always do)."),
    )
    confirmation_channel = models.CharField(
        _("confirmation channel"),
        max_length=20,
        choices=ConfirmationChannel.choices,
        default=ConfirmationChannel.CLIENT,
        help_text=_(
            "Who says yes: the client (a form in it, or the approval page if it has none), or only the calling "
            "user, signed in on this site's approval page, whatever the client answers. The approval page switches "
            "confirmation on; tools whose code asks for it always use it."
        ),
    )
    rate_limit = models.CharField(
        _("rate limit"),
        max_length=20,
        blank=True,
        validators=[validate_rate_limit],
        help_text=_("Calls per caller, e.g. '60/min', '1000/day'. The stricter of this and the code's applies."),
    )
    timeout = models.FloatField(
        _("timeout (seconds)"),
        null=True,
        blank=True,
        validators=[MinValueValidator(0.1)],
        help_text=_("The shorter of this and the code's timeout applies."),
    )
    max_result_bytes = models.PositiveIntegerField(
        _("result size limit (bytes)"),
        null=True,
        blank=True,
        validators=[MinValueValidator(256)],
        help_text=_(
            "A larger result is refused as result_too_large. The smaller of this and the code's limit applies."
        ),
    )
    tasks_allowed = models.BooleanField(
        _("may run as a task"),
        default=True,
        help_text=_(
            "For tools whose code supports MCP tasks: off runs every call directly. A tool whose code requires a "
            "task is then not served."
        ),
    )
    ui_enabled = models.BooleanField(
        _("show its UI"),
        default=True,
        help_text=_(
            "For tools whose code shows results with a template (an MCP App): off serves the tool without it, "
            "to every client, as text and structured results."
        ),
    )
    tags = models.CharField(
        _("tags"),
        max_length=500,
        blank=True,
        validators=[validate_tags],
        help_text=_(
            "Space-separated tags, added to those declared in code. An endpoint may offer the capabilities "
            "carrying a tag."
        ),
    )
    read_only_hint = models.BooleanField(
        _("read-only hint"), null=True, blank=True, help_text=_("Override the declared hint; blank keeps it.")
    )
    destructive_hint = models.BooleanField(
        _("destructive hint"), null=True, blank=True, help_text=_("Override the declared hint; blank keeps it.")
    )
    idempotent_hint = models.BooleanField(
        _("idempotent hint"), null=True, blank=True, help_text=_("Override the declared hint; blank keeps it.")
    )
    open_world_hint = models.BooleanField(
        _("open-world hint"), null=True, blank=True, help_text=_("Override the declared hint; blank keeps it.")
    )
    log_argument_values = models.BooleanField(
        _("log argument values"),
        default=False,
        help_text=_("Record argument values in the usage log (keys that look secret are always redacted)."),
    )
    stale = models.BooleanField(
        _("stale"), default=False, editable=False, help_text=_("The capability no longer exists in code.")
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("exposed tool")
        verbose_name_plural = _("exposed tools")
        ordering = ["key"]
        permissions = [("try_exposedtool", _("Can call tools from the admin"))]
        constraints = [
            models.UniqueConstraint(
                Lower("wire_name"),
                condition=~models.Q(wire_name=""),
                name="mcp_expose_tool_wire_name_ci_unique",
                violation_error_message=_("Another tool already uses this name (names are compared ignoring case)."),
            )
        ]

    def __str__(self) -> str:
        return self.wire_name or self.key

    @property
    def extra_scope_set(self) -> frozenset[str]:
        return split_scopes(self.extra_scopes)

    def exposure_state(self, allowed_client_ids: frozenset[str] = frozenset()) -> ExposureState:
        """The row as the catalog compiler reads it (pass the allowed clients' ids, prefetched)."""
        return ExposureState(
            key=self.key,
            enabled=self.enabled,
            wire_name=self.wire_name,
            title=self.title,
            description=self.description,
            extra_scopes=self.extra_scope_set,
            allowed_clients=allowed_client_ids,
            requires_confirmation=self.requires_confirmation,
            confirmation_channel=APPROVAL_PAGE_CHANNEL
            if self.confirmation_channel == APPROVAL_PAGE_CHANNEL
            else CLIENT_CHANNEL,
            rate_limit=self.rate_limit,
            timeout=self.timeout,
            max_result_bytes=self.max_result_bytes,
            log_argument_values=self.log_argument_values,
            tasks_allowed=self.tasks_allowed,
            ui_enabled=self.ui_enabled,
            tags=parse_tags(self.tags),
            annotations={
                "read_only": self.read_only_hint,
                "destructive": self.destructive_hint,
                "idempotent": self.idempotent_hint,
                "open_world": self.open_world_hint,
            },
        )

    def _clean_hints(self) -> None:
        """A hint may make a tool declared in code more careful, never less (see `declare.registry.loosens`); an
        upstream tool's hints are the row's to set."""
        from django.core.exceptions import ValidationError

        from mcp_expose.declare.registry import loosens, registry

        capability = registry.get(self.key)
        if capability is None:
            return
        hints = {
            "read_only_hint": ("read_only", self.read_only_hint),
            "destructive_hint": ("destructive", self.destructive_hint),
            "idempotent_hint": ("idempotent", self.idempotent_hint),
            "open_world_hint": ("open_world", self.open_world_hint),
        }
        problems = {
            field: f"Not this way: {problem}. Leave it blank to keep what the code declares."
            for field, (hint, value) in hints.items()
            if value is not None and (problem := loosens(capability.annotations, hint, value)) is not None
        }
        if problems:
            raise ValidationError(problems)

    def clean(self) -> None:
        super().clean()
        from mcp_expose.core.conf import get_settings
        from mcp_expose.declare.names import served_name
        from mcp_expose.declare.registry import registry

        self._clean_hints()
        if not self.wire_name:
            return
        style = get_settings().WIRE_NAMES
        folded = served_name(self.wire_name, style).casefold()
        overrides = dict(ExposedTool.objects.exclude(pk=self.pk).values_list("key", "wire_name"))
        for capability in registry:
            other = served_name(overrides.get(capability.key) or capability.name, style)
            if capability.key != self.key and other.casefold() == folded:
                raise ValidationError(
                    {"wire_name": _("The tool %(key)s is already served under this name.") % {"key": capability.key}}
                )
