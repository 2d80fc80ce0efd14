"""`@resource` and `@prompt`: read-only contents and reusable prompts, governed like tools."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from mcp_expose.core.errors import DeclarationError
from mcp_expose.declare.adapters.django_views import ViewOperation, call_view
from mcp_expose.declare.adapters.routes import routes_for
from mcp_expose.declare.json_schemas import capped_parameters, object_schema
from mcp_expose.declare.registry import Annotations, Capability, CapabilityRegistry, string_set, tag_set
from mcp_expose.declare.registry import registry as default_registry
from mcp_expose.declare.schema import build_signature, generated_signature
from mcp_expose.declare.tools import _app_label_for
from mcp_expose.declare.uri_templates import InvalidUriTemplate
from mcp_expose.declare.uri_templates import variables as uri_variables


def resource(
    uri: str,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    scopes: Iterable[str] = (),
    permissions: Iterable[str] = (),
    view: Any = None,
    html: str = "main",
    completions: Mapping[str, Any] | None = None,
    enabled: bool = True,
    tags: Iterable[str] = (),
    key: str | None = None,
    registry: CapabilityRegistry | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]] | Capability:
    """Declare a resource at `uri`, a fixed URI or a template such as "library://books/{id}".

    As a decorator on a function (sync or async) whose parameters are the template's
    variables: it returns text, bytes (sent as a blob) or a JSON-able value. With
    `view=`, the resource mirrors a page of the application instead: the view runs
    as the caller with the template's variables as its URL keyword arguments.
    """
    try:
        variables = uri_variables(uri)
    except InvalidUriTemplate as exc:
        raise DeclarationError(f"resource {uri!r}: not a valid URI template ({exc}).") from None
    target_registry = registry if registry is not None else default_registry
    common: dict[str, Any] = dict(
        title=title,
        scopes=string_set(scopes, "scopes", uri),
        permissions=string_set(permissions, "permissions", uri),
        annotations=Annotations(read_only=True),
        enabled_by_default=enabled,
        uri=uri,
        mime_type=mime_type,
        completions=dict(completions or {}),
        tags=tag_set(tags, f"resource {uri}"),
    )

    if view is not None:
        origin = f"resource {uri}"
        routes = routes_for(view, origin)
        route = routes[0]
        missing = sorted(set(route.kwargs) - set(variables))
        if missing:
            raise DeclarationError(f"{origin}: the view's URL needs {missing}; put them in the URI template.")
        identity = key or f"{_app_label_for(view, origin)}.{name or route.url_name.replace(':', '.').replace('-', '_')}"
        schema = object_schema(capped_parameters({variable: {"type": "string"} for variable in variables}), variables)
        # Read like a GET of the page, by the same code that serves view-backed tools.
        operation = ViewOperation(route, "get", view, html, {}, kwarg_names=frozenset(route.kwargs))
        capability = Capability(
            key=identity,
            name=name or identity,
            kind="resource",
            target=partial(call_view, operation),
            source=generated_signature(schema),
            origin=origin,
            description=description
            if description is not None
            else inspect.cleandoc(getattr(view, "__doc__", "") or ""),
            call_style="mapping",
            **common,
        )
        return target_registry.register(capability)

    def declare(target: Callable[..., Any]) -> Callable[..., Any]:
        origin = f"{target.__module__}.{target.__qualname__}"
        signature = build_signature(target, origin=origin)
        parameters = set(signature.input_schema["properties"])
        if parameters != set(variables):
            raise DeclarationError(
                f"{origin}: its parameters {sorted(parameters)} must be exactly the URI template's "
                f"variables {sorted(variables)}."
            )
        identity = key or f"{_app_label_for(target, origin)}.{target.__name__}"
        capability = Capability(
            key=identity,
            name=name or identity,
            kind="resource",
            target=target,
            source=signature,
            origin=origin,
            description=description if description is not None else inspect.cleandoc(target.__doc__ or ""),
            is_async=inspect.iscoroutinefunction(target),
            **common,
        )
        target_registry.register(capability)
        return target

    return declare


def prompt(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    scopes: Iterable[str] = (),
    permissions: Iterable[str] = (),
    completions: Mapping[str, Any] | None = None,
    enabled: bool = True,
    tags: Iterable[str] = (),
    key: str | None = None,
    registry: CapabilityRegistry | None = None,
) -> Any:
    """Declare a prompt: a function of string arguments returning the text (or a list of messages).

    `completions` offers values for arguments: a list, or a callable taking the
    typed prefix and returning candidates.
    """

    def declare(target: Callable[..., Any]) -> Callable[..., Any]:
        origin = f"{target.__module__}.{target.__qualname__}"
        signature = build_signature(target, origin=origin)
        for argument, schema in signature.input_schema["properties"].items():
            types = {option.get("type") for option in schema.get("anyOf", [schema])}
            if not types <= {"string", "null"}:
                raise DeclarationError(
                    f"{origin}: prompt argument {argument!r} must be a str (prompt arguments are text)."
                )
        identity = key or f"{_app_label_for(target, origin)}.{target.__name__}"
        capability = Capability(
            key=identity,
            name=name or identity,
            kind="prompt",
            target=target,
            source=signature,
            origin=origin,
            title=title,
            description=description if description is not None else inspect.cleandoc(target.__doc__ or ""),
            scopes=string_set(scopes, "scopes", origin),
            permissions=string_set(permissions, "permissions", origin),
            enabled_by_default=enabled,
            is_async=inspect.iscoroutinefunction(target),
            completions=dict(completions or {}),
            tags=tag_set(tags, origin),
        )
        (registry if registry is not None else default_registry).register(capability)
        return target

    return declare(func) if func is not None else declare
