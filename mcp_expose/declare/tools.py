"""`@tool`: declare a function as a capability, leaving the function itself untouched."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django.apps import apps

from mcp_expose.core.errors import DeclarationError
from mcp_expose.declare.apps import AppDeclaration, app_field
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
from mcp_expose.declare.schema import build_signature, explicit_signature


def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    scopes: Iterable[str] = (),
    permissions: Iterable[str] = (),
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
    enabled: bool = True,
    requires_confirmation: ConfirmationDeclaration = False,
    rate_limit: str = "",
    timeout: float | None = None,
    max_result_bytes: int | None = None,
    log_argument_values: bool = False,
    task: TaskSupport | None = None,
    task_starts_in_call: bool = False,
    app: AppDeclaration = None,
    tags: Iterable[str] = (),
    input_schema: Mapping[str, Any] | None = None,
    key: str | None = None,
    registry: CapabilityRegistry | None = None,
) -> Any:
    """Declare a sync or async function as a tool.

    The identity is `app_label.function_name` (or `key=`), stable across
    renames of the wire name. `name=` sets the wire name (the identity by
    default); `enabled=` is the exposure state a new admin row starts with.
    `scopes` are OAuth/API-key scopes the caller must hold; `permissions` are
    Django permissions (`"app_label.codename"`) the user must have.
    `requires_confirmation` makes every call wait for a human's yes: True asks
    through the client (its form, or the approval page), "approval_page" only
    on the site's approval page, from the signed-in user;
    `rate_limit` ("60/min"), `timeout` (seconds) and `max_result_bytes` bound
    each call; `log_argument_values` records argument values in the usage log.
    `task` makes a call an MCP task for clients that support them: "optional" (such
    clients get a task, others a direct call) or "required" (others get -32021). The
    task runs in a worker of Django's Tasks framework; with `task_starts_in_call`
    the call runs until the function calls `context.continue_as_task()`.
    `app` shows the result with a template, as an MCP App: `mcp_expose.App(template=...,
    visibility=..., ...)`, or just the template's name. `tags` label it for endpoints' toolsets.
    `input_schema` replaces the schema read from type hints with a JSON Schema
    served as written (for what type hints cannot say, such as conditionals);
    the function then receives the validated arguments as keyword arguments.
    The function is returned unchanged.
    """

    def declare(target: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(target) or inspect.isclass(target):
            raise DeclarationError(f"@tool expects a function, got {target!r}.")
        origin = f"{target.__module__}.{target.__qualname__}"
        identity = key or f"{_app_label_for(target, origin)}.{target.__name__}"
        capability = Capability(
            key=identity,
            name=name or identity,
            kind="function",
            target=target,
            source=build_signature(target, origin=origin)
            if input_schema is None
            else explicit_signature(target, input_schema, origin=origin),
            origin=origin,
            title=title,
            description=inspect.cleandoc(description if description is not None else (target.__doc__ or "")),
            scopes=string_set(scopes, "scopes", origin),
            permissions=string_set(permissions, "permissions", origin),
            annotations=Annotations(
                read_only=read_only, destructive=destructive, idempotent=idempotent, open_world=open_world
            ),
            enabled_by_default=enabled,
            is_async=inspect.iscoroutinefunction(target),
            **confirmation_fields(requires_confirmation, origin),
            rate_limit=rate_limit,
            timeout=timeout,
            max_result_bytes=max_result_bytes,
            log_argument_values=log_argument_values,
            **task_fields(task, task_starts_in_call, origin),
            **app_field(app, origin),
            tags=tag_set(tags, origin),
        )
        (registry if registry is not None else default_registry).register(capability)
        return target

    return declare(func) if func is not None else declare


def _app_label_for(target: Callable[..., Any], origin: str) -> str:
    config = apps.get_containing_app_config(target.__module__)
    if config is None:
        raise DeclarationError(
            f"{origin} is not inside an installed app, so it has no app label. "
            "Declare tools in an installed app's mcp.py, or pass key='app_label.name'."
        )
    return config.label
