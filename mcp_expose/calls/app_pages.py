"""The `ui://` pages of MCP Apps: a tool's template, rendered for the host that shows the tool's results.

A page is the same for every caller (the call's data reaches it through the Apps bridge, not the template), so
it is rendered once per catalog revision and kept; with `DEBUG` on it is rendered at every read, so a template
being edited shows at once. Who may read it is who may use one of the tools it shows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.template import TemplateDoesNotExist, TemplateSyntaxError
from django.template.loader import render_to_string

from mcp_expose.access.policy import decide
from mcp_expose.catalog.compiled import Catalog, ToolEntry
from mcp_expose.catalog.memo import MemoKind
from mcp_expose.core.conf import get_settings
from mcp_expose.core.db import tidies_connections
from mcp_expose.core.errors import McpExposeError
from mcp_expose.core.principal import Principal
from mcp_expose.declare.apps import App

logger = logging.getLogger("mcp_expose.apps")
# A page's HTML, by its URI and the tools it names (those the caller may use); a revision keeps this many.
APP_PAGE_HTML: MemoKind[tuple[str, tuple[str, ...]], str] = MemoKind("app page HTML", limit=256)


class UnknownPage(McpExposeError, LookupError):
    """No page at this `ui://` URI that the caller may read (missing and forbidden look alike)."""


class PageFailed(McpExposeError):
    """The page's template could not be rendered; the message says why, without the template's internals."""


@dataclass(frozen=True, slots=True)
class AppPage:
    uri: str
    app: App
    tools: tuple[ToolEntry, ...]


def pages_for(catalog: Catalog, principal: Principal) -> tuple[AppPage, ...]:
    """The pages `principal` may read: those of the tools they may use."""
    found = []
    for uri, (app, tools) in catalog.app_pages().items():
        usable = tuple(entry for entry in tools if decide(principal, entry).allowed)
        if usable:
            found.append(AppPage(uri, app, usable))
    return tuple(found)


def find_page(catalog: Catalog, principal: Principal, uri: str) -> AppPage:
    """The page at `uri`, or `UnknownPage`."""
    page = next((page for page in pages_for(catalog, principal) if page.uri == uri), None)
    if page is None:
        raise UnknownPage(uri)
    return page


@tidies_connections
def render_page(catalog: Catalog, page: AppPage) -> str:
    """The page's HTML (sync: templates may query). Raises `PageFailed`."""
    names = [entry.name for entry in page.tools]
    if settings.DEBUG:
        return render_app(page.app, names)
    # Kept per set of tools shown: the page names those the caller may use, and no others.
    return catalog.remember(APP_PAGE_HTML, (page.uri, tuple(names)), lambda: str(render_app(page.app, names)))


def render_app(app: App, tool_names: list[str]) -> str:
    """An app's page for the tools it shows (sync; the admin's preview renders it too). Raises `PageFailed`."""
    conf = get_settings()
    context = {"app": app, "tools": tool_names, "server_name": conf.SERVER_NAME}
    try:
        html = render_to_string(app.template, context)
    except TemplateDoesNotExist:
        logger.error("MCP App page %s: the template %r does not exist.", app.resource_uri, app.template)
        raise PageFailed(f"The page's template {app.template!r} does not exist.") from None
    except TemplateSyntaxError as exc:
        logger.error("MCP App page %s: the template %r has an error: %s", app.resource_uri, app.template, exc)
        raise PageFailed(f"The page's template {app.template!r} has an error.") from None
    size = len(html.encode())
    if size > conf.APP_MAX_PAGE_BYTES:
        logger.error("MCP App page %s is %d bytes, over APP_MAX_PAGE_BYTES.", app.resource_uri, size)
        raise PageFailed(f"The page is larger than APP_MAX_PAGE_BYTES ({conf.APP_MAX_PAGE_BYTES} bytes).")
    return html
