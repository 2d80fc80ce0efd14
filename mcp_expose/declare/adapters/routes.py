"""Find where a view is routed in the URLconf: its URL name, its path, and its URL keyword arguments."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.urls import URLPattern, URLResolver, converters, get_resolver
from django.urls.resolvers import RoutePattern

from mcp_expose.core.errors import DeclarationError

CONVERTER_SCHEMAS: dict[type, dict[str, Any]] = {
    # HTTP takes the digits as text: so does the tool, beside the integer a list returned.
    converters.IntConverter: {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": "^[0-9]+$"}]},
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


def _walk(
    resolver: URLResolver, prefix: str, namespaces: list[str], kwargs: dict[str, dict[str, Any]]
) -> Iterator[Route]:
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
        kwargs = {
            name: dict(CONVERTER_SCHEMAS.get(type(conv), {"type": "string"}))
            for name, conv in pattern.converters.items()
        }
        return str(pattern), kwargs
    regex = pattern.regex.pattern  # RegexPattern: DRF routers produce these
    groups = named_groups(regex)
    template = regex
    for name, group in groups.items():
        template = template.replace(f"(?P<{name}>{group})", f"<{name}>", 1)
    template = template.lstrip("^").rstrip("$").replace("\\.", ".")
    return template, {
        name: {"type": "string", "minLength": 1, "pattern": f"^(?:{group})$"} for name, group in groups.items()
    }


def named_groups(regex: str) -> dict[str, str]:
    """Each named group of a regex and the expression inside it: `(?P<slug>[a-z(]+)` gives {"slug": "[a-z(]+"}.

    Read by hand, minding escapes, character classes and nested groups, because `re` keeps no group's text.
    """
    groups: dict[str, str] = {}
    for start in re.finditer(r"\(\?P<(\w+)>", regex):
        if _escaped(regex, start.start()):
            continue
        depth, index, in_class = 1, start.end(), False
        while index < len(regex) and depth:
            char = regex[index]
            if char == "\\":
                index += 2
                continue
            if in_class:
                in_class = char != "]" or regex[index - 1] == "["
            elif char == "[":
                in_class = True
                if regex[index + 1 : index + 2] == "^":
                    index += 1
            elif char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
            index += 1
        groups[start.group(1)] = regex[start.end() : index - 1]
    return groups


def _escaped(text: str, index: int) -> bool:
    backslashes = 0
    while index - backslashes - 1 >= 0 and text[index - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 1


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
