from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe

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


# MCP Apps pages ----------------------------------------------------------------------------------------------

# A page the host shows has no server of its own to load files from: what it needs is inlined, up to this much.
INLINE_STATIC_MAX_BYTES = 512 * 1024
CLOSING_TAG = re.compile(r"</(script|style)", re.IGNORECASE)
INLINE_KINDS = {".css": ("<style>", "</style>"), ".js": ("<script>", "</script>")}


@register.simple_tag
def mcp_app_bridge() -> SafeString:
    """The Apps bridge (`mcpApp`), inline: the host handshake, the tool's input and result, calls back."""
    return _inline_static("mcp_expose/app-bridge.js")


@register.simple_tag
def mcp_app_static(path: str) -> SafeString:
    """A static file (.css or .js) found by the staticfiles finders, inline in its <style> or <script> element,
    so the page needs no CSP domain for it."""
    return _inline_static(path)


def _inline_static(path: str) -> SafeString:
    from django.contrib.staticfiles import finders
    from django.core.exceptions import SuspiciousFileOperation

    if not isinstance(path, str):
        raise template.TemplateSyntaxError(f"mcp_app_static takes a static file's path, not {path!r}.")
    path = str.__str__(path)  # a plain str: a template literal arrives as a SafeString, which paths refuse
    suffix = Path(path).suffix.lower()
    if suffix not in INLINE_KINDS:
        raise template.TemplateSyntaxError(f"mcp_app_static inlines .css and .js files only, not {path!r}.")
    try:
        found = finders.find(path)
    except SuspiciousFileOperation:
        found = None  # a path out of the static folders ("../"): there is no such static file
    if not isinstance(found, str):
        raise template.TemplateSyntaxError(f"mcp_app_static: no static file {path!r}.")
    data = Path(found).read_bytes()
    if len(data) > INLINE_STATIC_MAX_BYTES:
        raise template.TemplateSyntaxError(
            f"mcp_app_static: {path!r} is over {INLINE_STATIC_MAX_BYTES} bytes; serve it from a CSP domain."
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise template.TemplateSyntaxError(f"mcp_app_static: {path!r} is not UTF-8 text.") from None
    opening, closing = INLINE_KINDS[suffix]
    # A closing tag inside the file would end the element early: escape its slash, which CSS and JS both allow.
    text = CLOSING_TAG.sub(r"<\\/\1", text)
    if suffix == ".js":
        # "<!--" then "<script" would put the HTML parser in a script's double-escaped state: "<\!--" is the same JS.
        text = text.replace("<!--", "<\\!--")
    return mark_safe(f"{opening}{text}{closing}")  # noqa: S308  (a project's own static file)
