"""`expose_ninja`: offer a Django Ninja API's operations as tools, one per operation, in one call."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from django.apps import apps

from mcp_expose.core.errors import DeclarationError
from mcp_expose.declare.adapters import ninja_api, ninja_calls, ninja_schema
from mcp_expose.declare.apps import AppDeclaration
from mcp_expose.declare.registry import Capability, CapabilityRegistry, ConfirmationDeclaration, TaskSupport
from mcp_expose.declare.registry import registry as default_registry
from mcp_expose.declare.view_tools import OperationSpec, common_fields, register_operations


def expose_ninja(
    api_or_router: Any,
    *,
    api: Any = None,
    operations: Iterable[str] | None = None,
    methods: Iterable[str] | None = None,
    paths: Iterable[str] | None = None,
    name: str | Mapping[str, str] | None = None,
    resource: str | None = None,
    title: str | None = None,
    description: str | None = None,
    scopes: Iterable[str] = (),
    permissions: Iterable[str] = (),
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
    """Declare one tool per operation of a Django Ninja API (a `NinjaAPI`, or a `Router` with `api=` the API
    that serves it). Call it once every router is added to the API.

    `operations` picks operations by name (the operation_id where one is set, else the view function's name),
    `methods` by HTTP method, `paths` by path (within the API or the router: "/books/{book_id}"). Keys are
    `app_label.resource.operation`, the resource being the router's prefix's last literal segment (`resource=`
    overrides it; the API's own operations have none); `name` overrides the name (a string for one operation, a
    mapping operation → name for several). Everything else means what it means for `expose_view`: hints derive
    from the HTTP method, deletes need confirmation unless told otherwise, `task` and `app` may map operations.
    Returns the capabilities registered.
    """
    origin = _origin(api_or_router, api)
    if not ninja_api.is_ninja(api_or_router):
        raise DeclarationError(f"{origin}: expose_ninja takes a NinjaAPI or a Router (is django-ninja installed?).")
    found = ninja_api.bound_operations(
        api_or_router, api, operations=operations, methods=methods, paths=paths, origin=origin
    )
    if isinstance(name, str) and len(found) != 1:
        raise DeclarationError(f"{origin}: name= is a string, but {len(found)} operations are exposed; map them.")
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
    several_methods = {op.name for op in found if sum(other.name == op.name for other in found) > 1}
    specs = []
    for operation in found:
        operation_origin = f"{origin} {operation.method.upper()} {operation.path}"
        action = f"{operation.name}_{operation.method}" if operation.name in several_methods else operation.name
        prefix = ".".join(
            part for part in (_app_label(operation, operation_origin), resource or operation.resource) if part
        )
        target = partial(_acall if operation.is_async else _call, operation)
        specs.append(
            OperationSpec(
                key=f"{prefix}.{action}",
                action=action,
                method=operation.method,
                signature_factory=partial(_signature, operation, operation_origin),
                target=target,
                description=description if description is not None else _description(operation),
                is_async=operation.is_async,
            )
        )
    return register_operations(
        specs,
        origin=origin,
        name=name,
        title=title,
        overrides={
            "read_only": read_only,
            "destructive": destructive,
            "idempotent": idempotent,
            "open_world": open_world,
        },
        requires_confirmation=requires_confirmation,
        task=task,
        app=app,
        common=common,
        registry=registry if registry is not None else default_registry,
    )


def _signature(operation: ninja_api.NinjaOperation, origin: str) -> ninja_schema.NinjaSignature:
    signature = ninja_schema.build_signature(operation, origin)
    operation.signature = signature
    return signature


def _call(operation: ninja_api.NinjaOperation, arguments: Mapping[str, Any], context: Any) -> Any:
    return ninja_calls.call_operation(operation, arguments, context)


async def _acall(operation: ninja_api.NinjaOperation, arguments: Mapping[str, Any], context: Any) -> Any:
    return await ninja_calls.acall_operation(operation, arguments, context)


def _origin(api_or_router: Any, api: Any) -> str:
    """How errors name the declaration: the API by its URL namespace, a router by the API it is exposed from."""
    namespace = getattr(api_or_router, "urls_namespace", None) or getattr(api, "urls_namespace", None)
    kind = "API" if hasattr(api_or_router, "urls_namespace") else "router"
    return f"expose_ninja(the Ninja {kind} of {namespace!r})" if namespace else "expose_ninja"


def _app_label(operation: ninja_api.NinjaOperation, origin: str) -> str:
    module = getattr(inspect.unwrap(operation.bound.view_func), "__module__", "")
    config = apps.get_containing_app_config(module)
    if config is None:
        raise DeclarationError(f"{origin}: {module} is not inside an installed app, so its tools have no app label.")
    return config.label


def _description(operation: ninja_api.NinjaOperation) -> str:
    bound = operation.bound
    return str(bound.description or bound.summary or "").strip()
