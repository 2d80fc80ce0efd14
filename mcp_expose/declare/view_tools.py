"""`expose_view`: offer views the project already has (DRF or plain Django) as tools, one per operation."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.apps import apps

from mcp_expose.core.errors import DeclarationError
from mcp_expose.declare.adapters import django_views, drf, drf_operations
from mcp_expose.declare.adapters.routes import Route, routes_for, unwrap
from mcp_expose.declare.apps import AppDeclaration, app_field, app_for_action
from mcp_expose.declare.registry import (
    Annotations,
    Capability,
    CapabilityRegistry,
    ConfirmationDeclaration,
    TaskSupport,
    confirmation_fields,
    string_set,
    tag_set,
    task_fields,
)
from mcp_expose.declare.registry import registry as default_registry
from mcp_expose.declare.schema import LazySignature, SchemaSignature, generated_signature

ACTION_TEXT = {
    "list": "List {plural}.",
    "retrieve": "Get one {singular}.",
    "create": "Create one {singular}.",
    "update": "Replace one {singular} (every field).",
    "partial_update": "Change some fields of one {singular}.",
    "destroy": "Delete one {singular}.",
}


def expose_view(
    view: Any,
    *,
    actions: Iterable[str] | None = None,
    methods: Iterable[str] | None = None,
    name: str | Mapping[str, str] | None = None,
    resource: str | None = None,
    title: str | None = None,
    description: str | None = None,
    scopes: Iterable[str] = (),
    permissions: Iterable[str] = (),
    query_params: Mapping[str, Any] | None = None,
    html: str = "main",
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
    enabled: bool = True,
    requires_confirmation: ConfirmationDeclaration | None = None,
    rate_limit: str = "",
    timeout: float | None = None,
    max_result_bytes: int | None = None,
    log_argument_values: bool = False,
    task: TaskSupport | Mapping[str, TaskSupport] | None = None,
    app: AppDeclaration | Mapping[str, AppDeclaration] = None,
    tags: Iterable[str] = (),
    registry: CapabilityRegistry | None = None,
) -> list[Capability]:
    """Declare tools for a routed view: every ViewSet action, APIView method or Django view method.

    DRF views: `actions` picks ViewSet actions ("list", "retrieve", custom @action names) or APIView methods.
    Django views: `methods` ("get", "post"; default by view type) and `query_params` (name → description,
    type, (type, description) or JSON schema); `html` is "main" (the page's <main> as text), "text" or "raw".
    Names default to `app_label.resource.action`, the resource being the route's last literal segment;
    `name` overrides it (a string for one operation, a mapping action → name for several).
    Annotations derive from the HTTP method; deletes need confirmation unless told otherwise
    (`requires_confirmation` takes what `@tool` takes). `task` ("optional" or "required", as for `@tool`, or a
    mapping action → either) runs calls as MCP tasks. `app` (what `@tool` takes, or a mapping action → it)
    shows results with a template, as an MCP App. `tags` label every operation for endpoints' toolsets.
    Returns the capabilities registered.
    """
    origin = f"{getattr(view, '__module__', '?')}.{getattr(view, '__qualname__', repr(view))}"
    routes = routes_for(view, origin)
    app_label = _app_label(view, origin)
    resource = resource or _resource(routes, origin)
    target_registry = registry if registry is not None else default_registry
    common = common_fields(
        scopes=scopes,
        permissions=permissions,
        enabled=enabled,
        rate_limit=rate_limit,
        timeout=timeout,
        max_result_bytes=max_result_bytes,
        log_argument_values=log_argument_values,
        tags=tags,
        origin=origin,
    )
    overrides = {"read_only": read_only, "destructive": destructive, "idempotent": idempotent, "open_world": open_world}
    operations: list[tuple[str, str, Any, Callable[[], SchemaSignature], Callable[..., Any], str]] = []
    if drf_operations.is_drf_view(view):
        for operation in drf_operations.operations_for(view, routes, list(actions) if actions is not None else None):
            key = f"{app_label}.{resource}.{operation.action}" if _several(view, routes) else f"{app_label}.{resource}"
            operation_origin = f"{origin}.{operation.action}"
            scope = key
            operations.append(
                (
                    key,
                    operation.method,
                    operation,
                    partial(_drf_signature, operation, operation_origin),
                    partial(_call_drf, operation, scope),
                    _drf_description(view, operation, description),
                )
            )
    else:
        chosen = [method.lower() for method in (methods or django_views.default_methods(view))]
        for route in routes:
            for method in chosen:
                page = django_views.ViewOperation(route, method, view, html, dict(query_params or {}))
                key = f"{app_label}.{resource}" + (f".{method}" if len(chosen) > 1 else "")
                operations.append(
                    (
                        key,
                        method,
                        page,
                        partial(_django_signature, page, origin),
                        partial(django_views.call_view, page),
                        description if description is not None else _doc(view),
                    )
                )
            break  # one route per Django view: the first named one
    specs = [
        OperationSpec(key, getattr(operation, "action", method), method, signature_factory, target, text)
        for key, method, operation, signature_factory, target, text in operations
    ]
    return register_operations(
        specs,
        origin=origin,
        name=name,
        title=title,
        overrides=overrides,
        requires_confirmation=requires_confirmation,
        task=task,
        app=app,
        common=common,
        registry=target_registry,
    )


@dataclass(frozen=True)
class OperationSpec:
    """One operation of an HTTP API, ready to become a tool: what `expose_view` and `expose_ninja` share."""

    key: str
    action: str  # what `name=`, `task=` and `app=` mappings are keyed by
    method: str  # the HTTP method, lower case: it sets the default hints and confirmation
    signature_factory: Callable[[], SchemaSignature]
    target: Callable[..., Any]
    description: str
    is_async: bool = False


def common_fields(
    *,
    scopes: Iterable[str],
    permissions: Iterable[str],
    enabled: bool,
    rate_limit: str,
    timeout: float | None,
    max_result_bytes: int | None,
    log_argument_values: bool,
    tags: Iterable[str],
    origin: str,
) -> dict[str, Any]:
    """The fields every tool of one declaration shares, checked."""
    return dict(
        scopes=string_set(scopes, "scopes", origin),
        permissions=string_set(permissions, "permissions", origin),
        enabled_by_default=enabled,
        rate_limit=rate_limit,
        timeout=timeout,
        max_result_bytes=max_result_bytes,
        log_argument_values=log_argument_values,
        tags=tag_set(tags, origin),
    )


def register_operations(
    specs: list[OperationSpec],
    *,
    origin: str,
    name: str | Mapping[str, str] | None,
    title: str | None,
    overrides: Mapping[str, bool | None],
    requires_confirmation: ConfirmationDeclaration | None,
    task: TaskSupport | Mapping[str, TaskSupport] | None,
    app: AppDeclaration | Mapping[str, AppDeclaration],
    common: Mapping[str, Any],
    registry: CapabilityRegistry,
) -> list[Capability]:
    """Register one tool per operation: hints derived from the HTTP method (the declaration's own win), deletes
    confirmed unless told otherwise, `task=` and `app=` per action."""
    if isinstance(app, Mapping):
        if unknown_apps := sorted(set(app) - {spec.action for spec in specs}):
            raise DeclarationError(f"{origin}: app= names actions not exposed: {unknown_apps}.")
    registered = []
    for spec in specs:
        derived = {
            **drf_operations.annotations_for(spec.method),
            **{k: v for k, v in overrides.items() if v is not None},
        }
        capability = Capability(
            key=spec.key,
            name=_name(name, spec.action, spec.key),
            kind="view",
            target=spec.target,
            source=LazySignature(spec.signature_factory),
            origin=origin,
            title=title,
            description=spec.description,
            annotations=Annotations(**derived),
            is_async=spec.is_async,
            **confirmation_fields(
                requires_confirmation if requires_confirmation is not None else spec.method == "delete", origin
            ),
            call_style="mapping",
            **task_fields(task.get(spec.action) if isinstance(task, Mapping) else task, False, origin),
            **app_field(app_for_action(app, spec.action), origin),
            **common,
        )
        registered.append(registry.register(capability))
    if not registered:
        raise DeclarationError(f"{origin}: nothing to expose (no matching actions or methods).")
    return registered


def _several(view: Any, routes: list[Route]) -> bool:
    """ViewSets and multi-method APIViews name each operation; a one-method view is just the resource."""
    if any(getattr(route.callback, "actions", None) for route in routes):
        return True
    return sum(1 for method in drf_operations.METHOD_ACTIONS if hasattr(view, method)) > 1


def _drf_signature(operation: drf_operations.Operation, origin: str) -> SchemaSignature:
    return drf.build_signature(operation, origin)


def _django_signature(operation: django_views.ViewOperation, origin: str) -> SchemaSignature:
    return generated_signature(django_views.operation_schema(operation, origin))


def _call_drf(operation: drf_operations.Operation, scope: str, arguments: Mapping[str, Any], context: Any) -> Any:
    return drf.call_operation(operation, arguments, context, scope)


def _name(name: str | Mapping[str, str] | None, action: str, key: str) -> str:
    if isinstance(name, str):
        return name
    if isinstance(name, Mapping) and action in name:
        return name[action]
    return key


def _app_label(view: Any, origin: str) -> str:
    config = apps.get_containing_app_config(getattr(unwrap(view), "__module__", ""))
    if config is None:
        raise DeclarationError(f"{origin} is not inside an installed app, so its tools have no app label.")
    return config.label


def _resource(routes: list[Route], origin: str) -> str:
    shortest = min(routes, key=lambda route: len(route.kwargs))
    segments = shortest.segments
    if not segments:
        raise DeclarationError(f"{origin}: its route has no literal segment to name the tools after; pass resource=.")
    return segments[-1].replace("-", "_")


def _doc(view: Any) -> str:
    return inspect.cleandoc(getattr(unwrap(view), "__doc__", None) or "")


def _drf_description(view: Any, operation: drf_operations.Operation, description: str | None) -> str:
    if description is not None:
        return description
    method = getattr(view, operation.action, None)
    own = inspect.getdoc(method) if method is not None and operation.action in vars(view) else None
    if own:
        return own
    model = getattr(getattr(view, "queryset", None), "model", None)
    if operation.action in ACTION_TEXT and model is not None:
        meta = model._meta
        text = ACTION_TEXT[operation.action].format(plural=meta.verbose_name_plural, singular=meta.verbose_name)
        view_doc = _doc(view).splitlines()[0] if _doc(view) else ""
        return f"{text} {view_doc}".strip()
    return _doc(view)
