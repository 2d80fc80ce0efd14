"""django-mcp-expose: serve a Django project's capabilities to MCP clients, governed from the admin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "AccessDenied",
    "App",
    "Conflict",
    "InvalidInput",
    "InvocationContext",
    "NotFound",
    "Principal",
    "ToolError",
    "Audio",
    "Elicit",
    "EmbeddedResource",
    "ListRoots",
    "Sample",
    "Image",
    "ModelTools",
    "PROTOCOL_VERSIONS",
    "ResourceLink",
    "Text",
    "credentials_changed",
    "prompt",
    "resource",
    "resource_updated",
    "__version__",
    "expose_ninja",
    "expose_view",
    "tool",
]

if TYPE_CHECKING:
    from mcp_expose.access.credential_cache import credentials_changed
    from mcp_expose.calls import usage_writer as usage_writer
    from mcp_expose.core.asking import Elicit, ListRoots, Sample
    from mcp_expose.core.content import Audio, EmbeddedResource, Image, ResourceLink, Text
    from mcp_expose.core.context import InvocationContext
    from mcp_expose.core.errors import AccessDenied, Conflict, InvalidInput, NotFound, ToolError
    from mcp_expose.core.principal import Principal
    from mcp_expose.declare.apps import App
    from mcp_expose.declare.model_tools import ModelTools
    from mcp_expose.declare.ninja_tools import expose_ninja
    from mcp_expose.declare.resources import prompt, resource
    from mcp_expose.declare.tools import tool
    from mcp_expose.declare.view_tools import expose_view
    from mcp_expose.serving.events import resource_updated
    from mcp_expose.serving.versions import PROTOCOL_VERSIONS

_LAZY = {
    "tool": ".declare.tools",
    "App": ".declare.apps",
    "expose_view": ".declare.view_tools",
    "expose_ninja": ".declare.ninja_tools",
    "ModelTools": ".declare.model_tools",
    "resource": ".declare.resources",
    "prompt": ".declare.resources",
    "resource_updated": ".serving.events",
    "credentials_changed": ".access.credential_cache",
    "Elicit": ".core.asking",
    "Sample": ".core.asking",
    "ListRoots": ".core.asking",
    "Text": ".core.content",
    "Image": ".core.content",
    "Audio": ".core.content",
    "EmbeddedResource": ".core.content",
    "ResourceLink": ".core.content",
    "InvocationContext": ".core.context",
    "Principal": ".core.principal",
    "PROTOCOL_VERSIONS": ".serving.versions",
    "ToolError": ".core.errors",
    "InvalidInput": ".core.errors",
    "AccessDenied": ".core.errors",
    "NotFound": ".core.errors",
    "Conflict": ".core.errors",
}


# Modules that are public by their name here, though they live in a layer: `mcp_expose.usage_writer.status()`.
_MODULES = {
    "usage_writer": ".calls.usage_writer",
}


def __getattr__(name: str) -> Any:
    # Lazy, so that importing the package (as INSTALLED_APPS does) loads nothing Django-dependent.
    if name in _LAZY or name in _MODULES:
        from importlib import import_module

        value = (
            getattr(import_module(_LAZY[name], __name__), name)
            if name in _LAZY
            else import_module(_MODULES[name], __name__)
        )
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
