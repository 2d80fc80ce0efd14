"""One Django Ninja API's operations, as its URLs serve them, and the twin of each that an MCP call runs.

Django Ninja (1.7) binds each router to its API when the API's URLs are first made: every operation is cloned,
given the API, its inherited `auth=` and throttles, and the routers' decorators. Those bound operations are what
HTTP requests reach, so they are what is exposed here (`bound_operations`).

An MCP call runs a twin of the bound operation (`mcp_twin`): the same view function, parameters, response schemas,
throttles and decorators, with each `auth=` callable adapted to a caller who authenticated to MCP, not to the API:
- Ninja's session authentication (`django_auth`, `django_auth_superuser`, `django_auth_is_staff`) runs as it is,
  on the MCP caller's user: a staff-only operation stays staff-only.
- A scheme that reads a credential of the API's own (an API key in a header, query or cookie, a bearer token,
  HTTP basic) is replaced: the caller's MCP credential stands in for it, and `request.auth` is that credential
  as tools see it (the same object a DRF view gets). An anonymous MCP caller is refused, as over HTTP.
- Any other callable (a function of the project's) runs as it is, on the request the call makes.

The names read here that Django Ninja does not document (`_get_bound_routers`, a mount's decorators, a router's
mounted routers) are read
through `_required`, so that a release that renames them fails at declaration, naming what is missing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from mcp_expose.core.errors import DeclarationError

# The versions whose undocumented names this module reads (pyproject's `ninja` extra says the same).
SUPPORTED = "django-ninja>=1.7,<2"
METHODS = ("get", "post", "put", "patch", "delete")


@dataclass
class NinjaOperation:
    """One exposed (operation, HTTP method) pair of a Django Ninja API."""

    api: Any  # ninja.NinjaAPI
    bound: Any  # the ninja Operation the API's URLs serve
    twin: Any  # the copy an MCP call runs: see the module's docstring
    method: str  # lower case
    path: str  # the path within the API, as its OpenAPI document writes it: "/books/{book_id}"
    router_path: str  # the path within its router, as the router's decorator was given it
    name: str  # the operation's name: its operation_id, else its view function's name
    resource: str  # the last literal segment of the router's prefix, or "" for the API's own operations
    mount: str  # the API's URL prefix in the project's URLconf ("/api/"), or "" when it cannot be reversed
    signature: Any = field(default=None, repr=False)  # a NinjaSignature, set when first built

    @property
    def is_async(self) -> bool:
        return bool(getattr(self.bound, "is_async", False))

    @property
    def operation_id(self) -> str:
        """The id Ninja's OpenAPI document gives this operation."""
        return str(self.bound.operation_id or self.api.get_openapi_operation_id(self.bound))


def is_ninja(target: Any) -> bool:
    """Whether `target` is a Django Ninja API or router (False when Django Ninja is not installed)."""
    try:
        from ninja import NinjaAPI, Router
    except ImportError:
        return False
    return isinstance(target, (NinjaAPI, Router))


def bound_operations(
    api_or_router: Any,
    api: Any,
    *,
    operations: Iterable[str] | None,
    methods: Iterable[str] | None,
    paths: Iterable[str] | None,
    origin: str,
) -> list[NinjaOperation]:
    """The operations to expose: every one the API (or, given a router, that router's mount) serves, or those
    that `operations` names (by name or operation_id), `methods` and `paths` allow."""
    from ninja import NinjaAPI

    api = _the_api(api_or_router, api, origin)
    bound_routers = _required(api, "_get_bound_routers", origin)()
    if not isinstance(api_or_router, NinjaAPI):
        mounts = [bound for bound in bound_routers if bound.template is api_or_router]
        if not mounts:
            raise DeclarationError(f"{origin}: the router is not mounted in that API; add it with api.add_router().")
        if len(mounts) > 1:
            prefixes = ", ".join(repr(bound.prefix) for bound in mounts)
            raise DeclarationError(
                f"{origin}: the router is mounted {len(mounts)} times ({prefixes}); expose the API with "
                "paths= naming the mount's paths instead."
            )
        # The router and the routers mounted inside it, as its URLs serve them.
        subtree = set(_subtree(api_or_router, origin))
        bound_routers = [bound for bound in bound_routers if bound.template in subtree]
    wanted_methods = _methods(methods, origin)
    mount = _mount(api)
    found = []
    for bound_router in bound_routers:
        for router_path, path_view in bound_router.path_operations.items():
            for operation in path_view.operations:
                if not operation.include_in_schema:
                    continue  # hidden from the API's own schema: not described, so not exposed
                for method in (verb.lower() for verb in operation.methods):
                    if method in wanted_methods:
                        found.append(
                            NinjaOperation(
                                api=api,
                                bound=operation,
                                twin=mcp_twin(operation, bound_router, origin),
                                method=method,
                                path=_api_path(bound_router.prefix, router_path),
                                router_path=_normal(router_path),
                                name=_operation_name(operation),
                                resource=_resource(bound_router.prefix),
                                mount=mount,
                            )
                        )
    return _chosen(found, operations, paths, origin)


def _the_api(api_or_router: Any, api: Any, origin: str) -> Any:
    from ninja import NinjaAPI, Router

    if isinstance(api_or_router, NinjaAPI):
        if api is not None and api is not api_or_router:
            raise DeclarationError(f"{origin}: api= is for a router; an API is exposed as itself.")
        return api_or_router
    if not isinstance(api_or_router, Router):
        raise DeclarationError(f"{origin}: expose_ninja takes a NinjaAPI or a Router, not {type(api_or_router)!r}.")
    if not isinstance(api, NinjaAPI):
        raise DeclarationError(
            f"{origin}: a Router can be mounted in several APIs; pass api=, the NinjaAPI whose URLs serve it."
        )
    return api


def _subtree(router: Any, origin: str) -> Iterable[Any]:
    """`router` and every router mounted inside it, at any depth."""
    from ninja import Router

    yield router
    for mounted in _required(router, "_routers", origin):
        child = next((part for part in mounted if isinstance(part, Router)), None)
        if child is not None:
            yield from _subtree(child, origin)


def _required(owner: Any, name: str, origin: str) -> Any:
    try:
        return getattr(owner, name)
    except AttributeError:
        raise DeclarationError(
            f"{origin}: this Django Ninja has no {type(owner).__name__}.{name}, which expose_ninja reads; "
            f"the supported versions are {SUPPORTED}."
        ) from None


def _methods(methods: Iterable[str] | None, origin: str) -> frozenset[str]:
    if methods is None:
        return frozenset(METHODS)
    chosen = frozenset(method.lower() for method in methods)
    if unknown := sorted(chosen - set(METHODS)):
        raise DeclarationError(f"{origin}: methods= names {unknown}; the methods are {list(METHODS)}.")
    return chosen


def _chosen(
    found: list[NinjaOperation], names: Iterable[str] | None, paths: Iterable[str] | None, origin: str
) -> list[NinjaOperation]:
    chosen = found
    if names is not None:
        wanted = set(names)
        if unknown := sorted(wanted - {op.name for op in found} - {op.operation_id for op in found}):
            known = sorted({op.name for op in found})
            raise DeclarationError(f"{origin}: no operation is named {unknown}; its operations are {known}.")
        chosen = [op for op in chosen if op.name in wanted or op.operation_id in wanted]
    if paths is not None:
        wanted_paths = {_normal(path) for path in paths}
        if unknown := sorted(wanted_paths - {op.path for op in found} - {op.router_path for op in found}):
            known = sorted({op.path for op in found})
            raise DeclarationError(f"{origin}: no operation is at {unknown}; its paths are {known}.")
        chosen = [op for op in chosen if op.path in wanted_paths or op.router_path in wanted_paths]
    return chosen


def _normal(path: str) -> str:
    """A path as Ninja's OpenAPI document writes it: one leading slash, no converters (`{int:id}` is `{id}`)."""
    joined = "/" + "/".join(part for part in path.split("/") if part)
    if path.endswith("/") and joined != "/":
        joined += "/"
    return re.sub(r"{[^}:]+:", "{", joined)


def _api_path(prefix: str, router_path: str) -> str:
    return _normal("/".join(part for part in (prefix, router_path) if part))


def _resource(prefix: str) -> str:
    literal = [part for part in prefix.split("/") if part and not part.startswith("{")]
    return re.sub(r"[^A-Za-z0-9_]", "_", literal[-1]) if literal else ""


def _operation_name(operation: Any) -> str:
    name = operation.operation_id or operation.view_func.__name__
    return re.sub(r"[^A-Za-z0-9_-]", "_", str(name))


def _mount(api: Any) -> str:
    """Where the project's URLconf serves the API, for the path the operation sees (`request.path`)."""
    from django.urls import NoReverseMatch

    try:
        return str(api.get_root_path({}))
    except NoReverseMatch:
        return ""  # not in the URLconf, or under a namespace of its own: the path then starts at "/"


def mcp_twin(operation: Any, bound_router: Any, origin: str) -> Any:
    """A copy of the bound `operation` for MCP calls: the same in everything but its `auth=` callables."""
    twin = operation.clone()
    twin.api = operation.api
    twin.throttle_objects = list(operation.throttle_objects)
    is_async = bool(getattr(operation, "is_async", False))
    twin.auth_callbacks = [for_mcp_caller(callback, is_async) for callback in operation.auth_callbacks]
    mount = _required(bound_router, "mount", origin)
    decorators = [
        *_required(mount, "inherited_decorators", origin),
        *_required(bound_router.template, "_decorators", origin),
    ]
    for decorator, mode in decorators:  # as the API's binding applies them to the bound operation's run
        if mode == "view":
            twin.run = decorator(twin.run)
    return twin


def for_mcp_caller(callback: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    """The `auth=` callable an MCP call runs in place of `callback` (see the module's docstring); for an async
    operation, the stand-in is async too, so that it is awaited without a thread hop."""
    from ninja.security import SessionAuth, SessionAuthSuperUser
    from ninja.security.base import AuthBase

    if isinstance(callback, (SessionAuth, SessionAuthSuperUser)):
        return callback  # reads request.user: the MCP caller's
    if isinstance(callback, AuthBase):
        return amcp_credential if is_async else mcp_credential
    return callback


def mcp_credential(request: Any) -> Any:
    """The caller's MCP credential standing in for the API's own scheme: what tools see of it, or None (401)
    for a caller who is neither signed in nor holding a credential."""
    credential = getattr(request, "_force_auth_token", None)
    if credential is not None:
        return credential
    user = getattr(request, "user", None)
    return user if getattr(user, "is_authenticated", False) else None


async def amcp_credential(request: Any) -> Any:
    """`mcp_credential` for an async operation's authentication, which awaits it."""
    return mcp_credential(request)
