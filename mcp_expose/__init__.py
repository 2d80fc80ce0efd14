"""django-mcp-expose: serve a Django project's capabilities to MCP clients, governed from the admin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "AccessDenied",
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
    "expose_view",
    "tool",
]

if TYPE_CHECKING:
    from .asking import Elicit, ListRoots, Sample
    from .content import Audio, EmbeddedResource, Image, ResourceLink, Text
    from .context import InvocationContext
    from .credential_cache import credentials_changed
    from .declare import tool
    from .declare_models import ModelTools
    from .declare_resources import prompt, resource
    from .declare_views import expose_view
    from .errors import AccessDenied, Conflict, InvalidInput, NotFound, ToolError
    from .events import resource_updated
    from .principal import Principal
    from .versions import PROTOCOL_VERSIONS

_LAZY = {
    "tool": ".declare",
    "expose_view": ".declare_views",
    "ModelTools": ".declare_models",
    "resource": ".declare_resources",
    "prompt": ".declare_resources",
    "resource_updated": ".events",
    "credentials_changed": ".credential_cache",
    "Elicit": ".asking",
    "Sample": ".asking",
    "ListRoots": ".asking",
    "Text": ".content",
    "Image": ".content",
    "Audio": ".content",
    "EmbeddedResource": ".content",
    "ResourceLink": ".content",
    "InvocationContext": ".context",
    "Principal": ".principal",
    "PROTOCOL_VERSIONS": ".versions",
    "ToolError": ".errors",
    "InvalidInput": ".errors",
    "AccessDenied": ".errors",
    "NotFound": ".errors",
    "Conflict": ".errors",
}


def __getattr__(name: str) -> Any:
    # Lazy, so that importing the package (as INSTALLED_APPS does) loads nothing Django-dependent.
    if name in _LAZY:
        from importlib import import_module

        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
