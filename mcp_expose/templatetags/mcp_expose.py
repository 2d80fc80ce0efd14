from __future__ import annotations

from typing import Any

from django import template

from mcp_expose.catalog.compiled import provider
from mcp_expose.operator.consent import ConsentDetails, consent_details

register = template.Library()


@register.simple_tag
def mcp_consent(application: Any, redirect_uri: str, scopes: list[str]) -> ConsentDetails:
    """Consent-page facts for the DOT authorization template."""
    return consent_details(application, redirect_uri, list(scopes), provider.get_sync())


@register.simple_tag
def mcp_server_title() -> str:
    from mcp_expose.core.conf import get_settings

    conf = get_settings()
    return str(conf.SERVER_TITLE or conf.SERVER_NAME)
