"""The MCP Apps extension on the official SDK client's side: what a host that renders apps declares."""

from __future__ import annotations

from typing import Any

from mcp.client.extension import ClientExtension

UI = "io.modelcontextprotocol/ui"
APP_MIME_TYPE = "text/html;profile=mcp-app"


class AppsExtension(ClientExtension):
    """Declares io.modelcontextprotocol/ui with our MIME type, as Claude, VS Code and the ext-apps hosts do."""

    identifier = UI

    def settings(self) -> dict[str, Any]:
        return {"mimeTypes": [APP_MIME_TYPE]}


class WrongMimeApps(ClientExtension):
    """Declares the extension for another MIME type only: not a host that renders our pages."""

    identifier = UI

    def settings(self) -> dict[str, Any]:
        return {"mimeTypes": ["text/html"]}
