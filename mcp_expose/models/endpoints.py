"""Which capabilities each MCP endpoint offers, as the administrator chose: by tag, by name, or all."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from mcp_expose.core.endpoints import Endpoint, Toolset, endpoint_named, parse_tags
from mcp_expose.models.validators import validate_tags


class EndpointToolset(models.Model):
    """One endpoint's toolset. Endpoints are declared in `MCP_EXPOSE["ENDPOINTS"]`; their rows are made on
    migrate (and by `mcp_sync`) from the settings' `TOOLSET`, and from then on the row decides."""

    endpoint = models.CharField(
        _("endpoint"), max_length=40, unique=True, help_text=_("The endpoint's name in MCP_EXPOSE['ENDPOINTS'].")
    )
    offer_everything = models.BooleanField(
        _("offer everything"), default=False, help_text=_("Every capability the catalog serves, tags and list aside.")
    )
    tags = models.CharField(
        _("tags"),
        max_length=500,
        blank=True,
        validators=[validate_tags],
        help_text=_("Space-separated: capabilities carrying any of these tags (in code or on their row) are offered."),
    )
    capabilities = models.ManyToManyField(
        "mcp_expose.ExposedTool",
        blank=True,
        related_name="endpoint_toolsets",
        verbose_name=_("chosen capabilities"),
        help_text=_("Tools, resources and prompts offered whatever their tags."),
    )
    read_only = models.BooleanField(
        _("read-only tools only"),
        default=False,
        help_text=_("Of the tools chosen, offer only those hinted read-only (resources and prompts are reads)."),
    )
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("endpoint toolset")
        verbose_name_plural = _("endpoint toolsets")
        ordering = ["endpoint"]

    def __str__(self) -> str:
        return self.endpoint

    @property
    def configured(self) -> Endpoint | None:
        """The endpoint in the settings; None once it left them (the row is then ignored)."""
        return endpoint_named(self.endpoint)

    def toolset(self, keys: frozenset[str]) -> Toolset:
        """The row as the catalog reads it (pass the chosen capabilities' keys, prefetched)."""
        return Toolset(
            everything=self.offer_everything, tags=parse_tags(self.tags), keys=keys, read_only=self.read_only
        )
