"""Expose Django REST framework views: APIViews, generic views and ViewSet actions, one tool each.

The real view runs in-process for every call. Its permission classes (object
permissions too), throttles, filter backends, pagination and serializer validation
apply as for an HTTP request; its authentication classes do not run: the MCP caller
is forced as `request.user` and its credential as `request.auth` (DRF's forced
authentication). The view class is never modified.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..context import InvocationContext
from ..errors import DeclarationError
from ..schema import capped_parameters, object_schema
from .cursors import CURSOR_MAX_LENGTH, cursor_for_url, read_cursor
from .field_schema import serializer_input_schema
from .http import raise_for_status, response_data, view_request
from .middleware import run_view
from .routes import Route

logger = logging.getLogger("mcp_expose.views")

METHOD_ACTIONS = {"get": "get", "post": "post", "put": "put", "patch": "patch", "delete": "delete"}
BODY_METHODS = frozenset({"post", "put", "patch"})
PAGINATOR_CURSOR = "cursor"


@dataclass
class Operation:
    """One exposed (route, HTTP method) pair of a DRF view."""

    route: Route
    method: str
    action: str  # the ViewSet action, or the HTTP method for an APIView
    view_class: type
    initkwargs: dict[str, Any] = field(default_factory=dict)
    # Filled when the schema is built: which argument goes where.
    kwarg_names: frozenset[str] = frozenset()
    query_names: frozenset[str] = frozenset()
    body_names: frozenset[str] = frozenset()
    paginated: bool = False

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


def _view_instance(operation: Operation) -> Any:
    view = operation.view_class(**operation.initkwargs)
    view.action = operation.action
    view.request = None
    view.args = ()
    view.kwargs = {}
    view.format_kwarg = None
    return view


def _serializer(view: Any, origin: str) -> Any:
    try:
        return view.get_serializer()
    except Exception:  # noqa: BLE001  (get_serializer_class may read request.user)
        serializer_class = getattr(view, "serializer_class", None)
        if serializer_class is None:
            raise DeclarationError(
                f"{origin}: cannot tell which serializer the {view.action!r} action uses without a request; "
                "set serializer_class on the view (or on the @action)."
            ) from None
        return serializer_class()


def operation_schema(operation: Operation, origin: str) -> dict[str, Any]:
    """Arguments: URL keywords, then query parameters (filters, pagination, cursor), then body fields."""
    view = _view_instance(operation)
    properties = operation.route.kwarg_properties()
    required = list(properties)
    operation.kwarg_names = frozenset(properties)
    query: dict[str, Any] = {}
    is_list = operation.method == "get" and not operation.is_detail
    if is_list:
        for backend_class in getattr(view, "filter_backends", []):
            query.update(_parameters(backend_class(), view))
        _describe_ordering(view, query)
        paginator = getattr(view, "paginator", None)
        if paginator is not None:
            operation.paginated = True
            query.update({name: schema for name, schema in _parameters(paginator, view).items() if name != PAGINATOR_CURSOR})
            query[PAGINATOR_CURSOR] = {
                "type": "string",
                "maxLength": CURSOR_MAX_LENGTH,
                "description": "Pass the next_cursor or previous_cursor of a previous result to get that page.",
            }
    capped_parameters(properties)  # URL keywords
    _merge(properties, capped_parameters(query), origin, "query parameter")
    operation.query_names = frozenset(query)
    body: dict[str, Any] = {}
    if operation.method in BODY_METHODS:
        serializer_schema = serializer_input_schema(
            _serializer(view, origin), partial=operation.method == "patch", origin=origin
        )
        body = serializer_schema["properties"]
        required.extend(name for name in serializer_schema.get("required", []) if name not in required)
    _merge(properties, body, origin, "serializer field")
    operation.body_names = frozenset(body)
    return object_schema(properties, required)


def _filterset_parameters(backend: Any, view: Any) -> dict[str, Any] | None:
    """django-filter's FilterSet fields (django-filter no longer describes them for DRF schemas itself)."""
    if not hasattr(backend, "get_filterset_class"):
        return None
    from .field_schema import django_field_schema

    queryset = getattr(view, "queryset", None)
    if queryset is None:
        try:
            queryset = view.get_queryset()
        except Exception:  # noqa: BLE001  (a queryset that needs a request)
            return {}
    filterset_class = backend.get_filterset_class(view, queryset)
    if filterset_class is None:
        return {}
    parameters = {}
    for name, declared in filterset_class.base_filters.items():
        schema = django_field_schema(declared.field)
        if schema is not None:
            parameters[name] = schema
    return parameters


def _parameters(component: Any, view: Any) -> dict[str, Any]:
    from_filterset = _filterset_parameters(component, view)
    if from_filterset is not None:
        return from_filterset
    try:
        parameters = component.get_schema_operation_parameters(view)
    except Exception:  # noqa: BLE001  (django-filter may need a queryset that depends on the request)
        logger.warning("Could not read the query parameters of %s", type(component).__name__, exc_info=True)
        return {}
    result = {}
    for parameter in parameters:
        if parameter.get("in", "query") != "query":
            continue
        schema = dict(parameter.get("schema") or {"type": "string"})
        if parameter.get("description"):
            schema["description"] = str(parameter["description"])
        result[str(parameter["name"])] = schema
    return result


def _describe_ordering(view: Any, query: dict[str, Any]) -> None:
    """OrderingFilter's parameter says only 'string'; name the fields the view allows."""
    from rest_framework.filters import OrderingFilter

    for backend_class in getattr(view, "filter_backends", []):
        if issubclass(backend_class, OrderingFilter):
            backend = backend_class()
            queryset = getattr(view, "queryset", None)
            try:
                fields = [name for name, _ in backend.get_valid_fields(queryset, view, {"request": None})]
            except Exception:  # noqa: BLE001
                continue
            if fields and backend.ordering_param in query:
                query[backend.ordering_param]["enum"] = [value for name in fields for value in (name, f"-{name}")]


def _merge(properties: dict[str, Any], extra: dict[str, Any], origin: str, what: str) -> None:
    for name, schema in extra.items():
        if name in properties:
            raise DeclarationError(f"{origin}: the {what} {name!r} has the same name as a URL keyword or "
                                   "another argument; rename one of them.")
        properties[name] = schema


def call_operation(operation: Operation, arguments: Mapping[str, Any], context: InvocationContext, scope: str) -> Any:
    """Run the view for one call (sync, inside the invocation hop) and return its data."""
    kwargs = {name: arguments[name] for name in operation.kwarg_names if name in arguments}
    query = {name: arguments[name] for name in operation.query_names if name in arguments and name != PAGINATOR_CURSOR}
    if arguments.get(PAGINATOR_CURSOR) and operation.paginated:
        allowed = operation.query_names | _paginator_keys(operation)
        for key, value in read_cursor(arguments[PAGINATOR_CURSOR], scope):
            if key in allowed:
                query[key] = value
    body = {name: arguments[name] for name in operation.body_names if name in arguments}
    request = view_request(
        context, operation.method.upper(), operation.route.url_name, kwargs, query,
        body if operation.method in BODY_METHODS else None,
    )
    response = run_view(operation.route.callback, request, kwargs)
    data = response_data(response, "text")
    raise_for_status(response, data)
    if operation.paginated and isinstance(data, Mapping) and "results" in data:
        data = dict(data)
        data["next_cursor"] = cursor_for_url(data.pop("next", None), scope)
        data["previous_cursor"] = cursor_for_url(data.pop("previous", None), scope)
    return data


def _paginator_keys(operation: Operation) -> frozenset[str]:
    paginator = getattr(_view_instance(operation), "paginator", None)
    names = {getattr(paginator, attribute, None) for attribute in
             ("page_query_param", "page_size_query_param", "limit_query_param", "offset_query_param", "cursor_query_param")}
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

