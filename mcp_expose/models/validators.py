"""The validators of the admin-edited fields: names, scopes, rates and prompt arguments.

Migrations name them as `mcp_expose.models.validate_*`, which `models/__init__` keeps."""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

from mcp_expose.core.conf import get_settings
from mcp_expose.core.endpoints import TAG, parse_tags
from mcp_expose.declare.names import scope_problem, wire_name_problem


def validate_wire_name(value: str) -> None:
    """A name an administrator gives a tool or prompt: one clients accept in the deployment's WIRE_NAMES style
    (portable: no '.', which Claude Desktop and Codex refuse)."""
    if value and (problem := wire_name_problem(value, get_settings().WIRE_NAMES)):
        raise ValidationError(problem[0].upper() + problem[1:] + ".", code="invalid_name")


def validate_rate_limit(value: str) -> None:
    from mcp_expose.core.rates import parse_rate

    if value:
        try:
            parse_rate(value)
        except ValueError as exc:
            raise ValidationError(str(exc), code="invalid_rate") from None


def validate_scopes(value: str) -> None:
    problems = [problem for scope in value.split() if (problem := scope_problem(scope))]
    if problems:
        raise ValidationError("; ".join(problems) + ".", code="invalid_scope")


def validate_tags(value: str) -> None:
    bad = sorted(tag for tag in parse_tags(value) if not TAG.fullmatch(tag))
    if bad:
        raise ValidationError(
            _("%(tags)s: a tag is 1 to 50 letters, digits, '_', '.', ':' or '-'."),
            code="invalid_tag",
            params={"tags": ", ".join(bad)},
        )


ARGUMENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def validate_prompt_arguments(value: object) -> None:
    """[{"name": "customer", "description": "...", "required": true, "values": ["a", "b"]}, ...]"""
    if not isinstance(value, list):
        raise ValidationError(_("Write the arguments as a JSON list of objects."), code="invalid")
    seen: set[str] = set()
    for index, argument in enumerate(value):
        if not isinstance(argument, dict) or not isinstance(argument.get("name"), str):
            raise ValidationError(_('Argument %(n)d needs a "name".') % {"n": index + 1}, code="invalid")
        name = argument["name"]
        if not ARGUMENT_NAME.fullmatch(name):
            raise ValidationError(_("%(name)r is not a valid argument name (letters, digits, _).") % {"name": name})
        if name in seen:
            raise ValidationError(_("The argument %(name)r is declared twice.") % {"name": name})
        seen.add(name)
        unknown = set(argument) - {"name", "description", "required", "values"}
        if unknown:
            raise ValidationError(
                _("Unknown keys %(keys)s in argument %(name)r.") % {"keys": sorted(unknown), "name": name}
            )
        if "values" in argument and not (
            isinstance(argument["values"], list) and all(isinstance(item, str) for item in argument["values"])
        ):
            raise ValidationError(_('"values" of %(name)r must be a list of strings.') % {"name": name})
