"""One DRF view's operations (a route and an HTTP method each), and the view and request one call makes.

What the schema builder, the caller and the refusal explainer share: the view made as it stands before a
request, the URL keywords, and the request carrying the caller's arguments where the view reads them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_expose.core.context import InvocationContext
from mcp_expose.core.errors import DeclarationError
from mcp_expose.core.principal import Principal
from mcp_expose.core.requests import build_http_request
from mcp_expose.declare.adapters.caller_schemas import ViewSignature
from mcp_expose.declare.adapters.cursors import read_cursor
from mcp_expose.declare.adapters.http import (
    force_authentication,
    uploaded_file,
    view_request,
)
from mcp_expose.declare.adapters.routes import Route

# The generic mixins' writes, by the method a generic APIView maps to them.
GENERIC_WRITES = {"post": "create", "put": "update", "patch": "partial_update"}


METHOD_ACTIONS = {"get": "get", "post": "post", "put": "put", "patch": "patch", "delete": "delete"}


BODY_METHODS = frozenset({"post", "put", "patch"})


PAGINATOR_CURSOR = "cursor"


@dataclass(frozen=True)
class Routing:
    """Where each argument of one operation goes in the request the view sees."""

    url: Mapping[str, str]  # argument → URL keyword (they differ when a URL keyword shares a body field's name)
    query: frozenset[str]
    body: frozenset[str]
    files: frozenset[str] = frozenset()  # body fields that are uploads
    encoding: str = "json"  # how the body travels: "json", "multipart" or "form"


@dataclass
class Operation:
    """One exposed (route, HTTP method) pair of a DRF view."""

    route: Route
    method: str
    action: str  # the ViewSet action, or the HTTP method for an APIView
    view_class: type
    initkwargs: dict[str, Any] = field(default_factory=dict)
    paginated: bool = False
    signature: ViewSignature | None = None  # set when the schema is first built

    @property
    def is_detail(self) -> bool:
        return bool(self.route.kwargs)


def operations_for(view: type, routes: list[Route], actions: list[str] | None) -> list[Operation]:
    operations = []
    for route in routes:
        mapping: Mapping[str, str] | None = getattr(route.callback, "actions", None)
        initkwargs = dict(getattr(route.callback, "initkwargs", {}) or {})
        allowed_methods = set(getattr(view, "http_method_names", METHOD_ACTIONS))
        if mapping:  # a ViewSet route: method → action
            for method, action in mapping.items():
                if method in METHOD_ACTIONS and method in allowed_methods and (actions is None or action in actions):
                    operations.append(Operation(route, method, action, view, initkwargs))
        else:  # an APIView: every method it implements
            for method in METHOD_ACTIONS:
                if hasattr(view, method) and method in allowed_methods and (actions is None or method in actions):
                    operations.append(Operation(route, method, method, view, initkwargs))
    if actions is not None:
        missing = sorted(set(actions) - {operation.action for operation in operations})
        if missing:
            raise DeclarationError(f"{view.__qualname__} has no routed action(s) {', '.join(missing)}.")
    return operations


def view_instance(
    operation: Operation, principal: Principal | None = None, kwargs: Mapping[str, Any] | None = None
) -> Any:
    """The view as it stands before handling a request from `principal` (nobody, by default): its
    request is a real DRF request for that caller, so code that reads `request.user` reads a user."""
    from django.contrib.auth.models import AnonymousUser

    view = operation.view_class(**operation.initkwargs)
    view.action = operation.action
    view.action_map = {operation.method: operation.action}  # a ViewSet's, as its as_view() sets it
    view.args = ()
    view.kwargs = dict(kwargs or {})
    view.format_kwarg = None
    view.headers = {}
    caller = principal if principal is not None else Principal(user=AnonymousUser())
    http_request = build_http_request(caller, {}, operation.method.upper())
    force_authentication(http_request, caller)
    if principal is None:
        http_request._force_auth_user = caller.user  # type: ignore[attr-defined]
    view.request = view.initialize_request(http_request)
    return view


def url_kwargs(routing: Routing, arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {kwarg: arguments[argument] for argument, kwarg in routing.url.items() if argument in arguments}


def view_call_request(
    operation: Operation, routing: Routing, arguments: Mapping[str, Any], context: InvocationContext, scope: str
) -> Any:
    query = {name: arguments[name] for name in routing.query if name in arguments and name != PAGINATOR_CURSOR}
    if arguments.get(PAGINATOR_CURSOR) and operation.paginated:
        allowed = routing.query | paginator_keys(operation)
        for key, value in read_cursor(arguments[PAGINATOR_CURSOR], scope):
            if key in allowed:
                query[key] = value
    body = {name: arguments[name] for name in routing.body - routing.files if name in arguments}
    files = {name: uploaded_file(arguments[name], name) for name in routing.files if arguments.get(name) is not None}
    return view_request(
        context,
        operation.method.upper(),
        operation.route.url_name,
        url_kwargs(routing, arguments),
        query,
        body if operation.method in BODY_METHODS else None,
        encoding=routing.encoding,
        files=files,
    )


def paginator_keys(operation: Operation) -> frozenset[str]:
    paginator = getattr(view_instance(operation), "paginator", None)
    names = {
        getattr(paginator, attribute, None)
        for attribute in (
            "page_query_param",
            "page_size_query_param",
            "limit_query_param",
            "offset_query_param",
            "cursor_query_param",
        )
    }
    return frozenset(name for name in names if name)


def annotations_for(method: str) -> dict[str, bool]:
    """Derived from HTTP semantics: safe methods read, DELETE destroys, PUT and DELETE repeat harmlessly."""
    if method == "get":
        return {"read_only": True}
    if method == "delete":
        return {"read_only": False, "destructive": True, "idempotent": True}
    if method == "put":
        return {"read_only": False, "idempotent": True}
    return {"read_only": False, "destructive": False}


def is_drf_view(view: Any) -> bool:
    try:
        from rest_framework.views import APIView
    except ImportError:
        return False
    return isinstance(view, type) and issubclass(view, APIView)
