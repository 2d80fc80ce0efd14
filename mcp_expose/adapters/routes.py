"""Find where a view is routed in the URLconf: its URL name, its path, and its URL keyword arguments."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.urls import URLPattern, URLResolver, converters, get_resolver
from django.urls.resolvers import RoutePattern

from ..errors import DeclarationError

CONVERTER_SCHEMAS: dict[type, dict[str, Any]] = {
    converters.IntConverter: {"type": "integer", "minimum": 0},
    converters.UUIDConverter: {"type": "string", "format": "uuid"},
    converters.SlugConverter: {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$"},
    converters.PathConverter: {"type": "string", "minLength": 1},
    converters.StringConverter: {"type": "string", "minLength": 1, "pattern": "^[^/]+$"},
}


@dataclass(frozen=True)
class Route:
    callback: Callable[..., Any]
    url_name: str  # namespaced, for reverse()
    template: str  # the readable route, e.g. "api/books/<pk>/"
    kwargs: dict[str, dict[str, Any]]  # keyword argument → JSON schema

    def kwarg_properties(self) -> dict[str, dict[str, Any]]:
        """The URL keyword arguments as required tool arguments."""
        return {name: {**schema, "description": f"The {name} in the URL."} for name, schema in self.kwargs.items()}

    @property
    def segments(self) -> list[str]:
        """The literal path segments, e.g. ["api", "books"]."""
        return [part for part in self.template.split("/") if part and "<" not in part and "(" not in part]


def iter_routes() -> Iterator[Route]:
    yield from _walk(get_resolver(), "", [], {})


def _walk(resolver: URLResolver, prefix: str, namespaces: list[str], kwargs: dict[str, dict[str, Any]]) -> Iterator[Route]:
    for pattern in resolver.url_patterns:
        template, pattern_kwargs = _describe(pattern.pattern)
        if isinstance(pattern, URLResolver):
            spaces = [*namespaces, pattern.namespace] if pattern.namespace else namespaces
            yield from _walk(pattern, prefix + template, spaces, {**kwargs, **pattern_kwargs})
        elif isinstance(pattern, URLPattern) and pattern.name and "format" not in pattern_kwargs:
            # (Format-suffix twins, "books.json", are the same view again.)
            yield Route(
                callback=pattern.callback,
                url_name=":".join([*namespaces, pattern.name]),
                template=prefix + template,
                kwargs={**kwargs, **pattern_kwargs},
            )


def _describe(pattern: Any) -> tuple[str, dict[str, dict[str, Any]]]:
    """A readable template and the keyword arguments (with schemas) of one pattern."""
    if isinstance(pattern, RoutePattern):  # path("books/<int:pk>/")
        kwargs = {name: dict(CONVERTER_SCHEMAS.get(type(conv), {"type": "string"})) for name, conv in pattern.converters.items()}
        return str(pattern), kwargs
    regex = pattern.regex.pattern  # RegexPattern: DRF routers produce these
    names = list(re.compile(regex).groupindex)
    template = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"<\1>", regex).lstrip("^").rstrip("$").replace("\\.", ".")
    return template, {name: {"type": "string", "minLength": 1} for name in names}


def unwrap(callback: Callable[..., Any]) -> Callable[..., Any]:
    while hasattr(callback, "__wrapped__"):
        callback = callback.__wrapped__
    return callback


def routes_for(view: Any, origin: str) -> list[Route]:
    """Every named route whose callback is `view` (a class, or a function possibly behind decorators)."""
    found = []
    for route in iter_routes():
        callback = route.callback
        if isinstance(view, type):
            if getattr(callback, "cls", None) is view or getattr(callback, "view_class", None) is view:
                found.append(route)
        elif callback is view or unwrap(callback) is unwrap(view):
            found.append(route)
    if not found:
        raise DeclarationError(
            f"{origin}: the view is not routed by any named URL pattern. Add it to the URLconf with a name= "
            "(DRF routers name their routes)."
        )
    return found
