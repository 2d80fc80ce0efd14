"""Prompts written in the admin, served beside the ones declared in code."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from mcp_expose.models.validators import (
    validate_prompt_arguments,
    validate_scopes,
    validate_wire_name,
)


class PromptTemplate(models.Model):
    """A prompt written by an administrator: a Django template with declared arguments."""

    name = models.CharField(_("name"), max_length=64, unique=True, validators=[validate_wire_name])
    title = models.CharField(_("title"), max_length=200, blank=True)
    description = models.TextField(_("description"), blank=True)
    arguments = models.JSONField(
        _("arguments"),
        default=list,
        blank=True,
        validators=[validate_prompt_arguments],
        help_text=_(
            'A JSON list, e.g. [{"name": "customer", "description": "Who wrote in", "required": true, '
            '"values": ["Ada", "Grace"]}]. "values" are offered as completions.'
        ),
    )
    template = models.TextField(
        _("template"),
        help_text=_("The prompt's text. Use {{ argument }} to insert an argument; Django template syntax."),
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    scopes = models.CharField(
        _("scopes"),
        max_length=500,
        blank=True,
        validators=[validate_scopes],
        help_text=_("Space-separated scopes a caller needs to see and use this prompt."),
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("prompt")
        verbose_name_plural = _("prompts")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        from mcp_expose.declare.prompt_templates import try_render

        problem = try_render(self.template, self.arguments if isinstance(self.arguments, list) else [])
        if problem:
            raise ValidationError({"template": problem})
        from mcp_expose.core.conf import get_settings
        from mcp_expose.declare.names import served_name
        from mcp_expose.declare.registry import registry

        style = get_settings().WIRE_NAMES
        mine = served_name(self.name, style)
        if any(capability.kind == "prompt" and served_name(capability.name, style) == mine for capability in registry):
            raise ValidationError({"name": _("A prompt declared in code already has this name.")})
