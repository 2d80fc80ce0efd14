"""MCP Apps pages on the wire: a `ui://` page as `resources/list` lists it and `resources/read` answers it."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcp_expose.calls.app_pages import AppPage, PageFailed, UnknownPage, find_page, render_page
from mcp_expose.catalog.compiled import Catalog
from mcp_expose.core.db import in_worker_thread
from mcp_expose.core.principal import Principal
from mcp_expose.declare.apps import APP_MIME_TYPE

_render_in_thread = in_worker_thread(render_page)


def page_listing(page: AppPage) -> types.Resource:
    """The page in `resources/list` (for clients that negotiated Apps), with its `_meta.ui`."""
    app = page.app
    meta = app.resource_meta()
    return types.Resource(
        uri=page.uri,
        name=app.template,
        title=app.title,
        description=f"The page that shows the results of {', '.join(entry.name for entry in page.tools)}.",
        mime_type=APP_MIME_TYPE,
        _meta={"ui": meta} if meta else None,
    )


async def read_page(catalog: Catalog, principal: Principal, uri: str) -> Any:
    """`resources/read` of a `ui://` page: its HTML as `text/html;profile=mcp-app`, with its `_meta.ui`."""
    try:
        page = find_page(catalog, principal, uri)
        html = await _render_in_thread(catalog, page)
    except UnknownPage:
        raise MCPError(code=types.INVALID_PARAMS, message="Resource not found", data={"uri": uri}) from None
    except PageFailed as exc:
        raise MCPError(code=types.INTERNAL_ERROR, message=str(exc), data={"uri": uri}) from None
    meta = page.app.resource_meta()
    contents = types.TextResourceContents(
        uri=uri, mime_type=APP_MIME_TYPE, text=html, _meta={"ui": meta} if meta else None
    )
    return types.ReadResourceResult(contents=[contents], ttl_ms=0, cache_scope="private")
