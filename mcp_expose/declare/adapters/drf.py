"""Expose Django REST framework views: APIViews, generic views and ViewSet actions, one tool each.

The real view runs in-process for every call. Its permission classes (object
permissions too), throttles, filter backends, pagination and serializer validation
apply as for an HTTP request; its authentication classes do not run: the MCP caller
is forced as `request.user` and its credential as `request.auth` (DRF's forced
authentication). The view class is never modified.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any

from mcp_expose.core.content import ContentBundle
from mcp_expose.core.context import InvocationContext
from mcp_expose.core.errors import DeclarationError, InvalidInput, NotFound
from mcp_expose.core.principal import Principal
from mcp_expose.core.requests import build_http_request
from mcp_expose.declare.adapters.caller_schemas import CallerReads, CallerSchemas, ViewSignature
from mcp_expose.declare.adapters.cursors import CURSOR_MAX_LENGTH, cursor_for_url, read_cursor
from mcp_expose.declare.adapters.field_schema import serializer_input_schema
from mcp_expose.declare.adapters.http import (
    drf_result,
    field_errors,
    force_authentication,
    raise_for_status,
    uploaded_file,
    view_request,
)
from mcp_expose.declare.adapters.lookups import lookup_schema
from mcp_expose.declare.adapters.middleware import run_view
from mcp_expose.declare.adapters.routes import Route
from mcp_expose.declare.json_schemas import capped_parameters, object_schema

logger = logging.getLogger("mcp_expose.views")

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


def _view_instance(operation: Operation, principal: Principal | None = None, kwargs: Mapping[str, Any] | None = None) -> Any:
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


def build_signature(operation: Operation, origin: str) -> ViewSignature:
    """The operation's signature: one schema for everyone, or (when the serializer choice reads who is
    asking) a schema per caller, see `caller_schemas`."""
    reads: set[str] = set()
    schema, routing = operation_schema(operation, origin, None, reads)
    explainer = partial(_explain, operation) if _validates_with_serializer(operation) else None
    signature: ViewSignature
    if reads:
        signature = CallerSchemas(
            schema, routing, lambda principal: operation_schema(operation, origin, principal, set()), explainer
        )
    else:
        signature = ViewSignature(schema, routing, explainer)
    operation.signature = signature
    return signature


def operation_schema(
    operation: Operation, origin: str, principal: Principal | None, reads: set[str]
) -> tuple[dict[str, Any], Routing]:
    """Arguments: URL keywords, then query parameters (filters, pagination, cursor), then body fields.

    `reads` collects which attributes of the request saying who is asking the serializer step read."""
    view = _view_instance(operation, principal)
    url_schemas = {
        name: lookup_schema(operation.view_class, name, schema) for name, schema in operation.route.kwarg_properties().items()
    }
    capped_parameters(url_schemas)
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
    capped_parameters(query)
    body: dict[str, Any] = {}
    body_required: list[str] = []
    files: list[str] = []
    encoding = "json"
    if operation.method in BODY_METHODS:
        probe = CallerReads(view.request)
        view.request = probe
        try:
            serializer = _serializer(view, origin)
            serializer_schema = serializer_input_schema(
                serializer, partial=operation.method == "patch", origin=origin, files=files
            )
        finally:
            view.request = object.__getattribute__(probe, "_request")
            reads.update(probe.read)
        body = serializer_schema["properties"]
        body_required = list(serializer_schema.get("required", []))
        encoding = body_encoding(view, body, files, origin)
    properties: dict[str, Any] = {}
    url: dict[str, str] = {}
    for name, schema in url_schemas.items():
        argument = name if name not in query and name not in body else f"url_{name}"
        if argument in query or argument in body:
            raise DeclarationError(f"{origin}: the URL keyword {name!r} and the arguments {name!r} and {argument!r} "
                                   "clash; rename one of them.")
        properties[argument] = {**schema, "description": f"The {name} in the URL."}
        url[argument] = name
    required = list(properties)
    _merge(properties, query, origin, "query parameter")
    _merge(properties, body, origin, "serializer field")
    required.extend(name for name in body_required if name not in required)
    routing = Routing(url=MappingProxyType(url), query=frozenset(query), body=frozenset(body), files=frozenset(files),
                      encoding=encoding)
    return object_schema(properties, required), routing


def _serializer(view: Any, origin: str) -> Any:
    try:
        return view.get_serializer()
    except Exception:  # noqa: BLE001  (a get_serializer_class that needs more than a request)
        serializer_class = getattr(view, "serializer_class", None)
        if serializer_class is None:
            raise DeclarationError(
                f"{origin}: cannot tell which serializer the {view.action!r} action uses without a request; "
                "set serializer_class on the view (or on the @action)."
            ) from None
        return serializer_class()


def body_encoding(view: Any, body: Mapping[str, Any], files: list[str], origin: str) -> str:
    """How the body reaches the view: JSON where it parses JSON and nothing is uploaded, else multipart (or
    a form), as its parsers allow. A view no body can reach is refused here: a dead tool never reaches the
    catalog."""
    from rest_framework.parsers import FormParser, JSONParser, MultiPartParser

    parsers = [type(parser) for parser in view.get_parsers()]
    takes = {kind for kind, base in (("json", JSONParser), ("multipart", MultiPartParser), ("form", FormParser))
             if any(issubclass(parser, base) for parser in parsers)}
    names = ", ".join(parser.__name__ for parser in parsers) or "none"
    if files and "multipart" not in takes:
        raise DeclarationError(
            f"{origin}: the serializer has file fields ({', '.join(files)}), but the view parses no "
            f"multipart/form-data (its parsers: {names}). Add MultiPartParser to parser_classes: MCP uploads "
            "travel as base64 arguments, sent to the view as multipart."
        )
    if not files and "json" in takes:
        return "json"
    flat_only = "multipart" if "multipart" in takes else "form" if "form" in takes and not files else None
    if flat_only is None:
        raise DeclarationError(
            f"{origin}: the view parses none of JSON, multipart or form bodies (its parsers: {names}), so no "
            "MCP call could reach it. Add JSONParser (or MultiPartParser) to parser_classes, or do not expose it."
        )
    nested = sorted(name for name, schema in body.items() if name not in files and _is_nested(schema))
    if nested:
        raise DeclarationError(
            f"{origin}: the fields {', '.join(nested)} are objects, which a {flat_only} body cannot carry, and "
            f"the view parses no JSON (its parsers: {names})."
        )
    return flat_only


def _is_nested(schema: Mapping[str, Any]) -> bool:
    kinds = [schema.get("type"), *(branch.get("type") for branch in schema.get("anyOf", ()))]
    items = schema.get("items") or {}
    return "object" in kinds or (isinstance(items, Mapping) and items.get("type") == "object")


def _filterset_parameters(backend: Any, view: Any) -> dict[str, Any] | None:
    """django-filter's FilterSet fields (django-filter no longer describes them for DRF schemas itself)."""
    if not hasattr(backend, "get_filterset_class"):
        return None
    from mcp_expose.declare.adapters.field_schema import django_field_schema

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
                query[backend.ordering_param].update(ordering_schema(fields))


def ordering_schema(fields: list[str]) -> dict[str, Any]:
    """OrderingFilter takes a comma-separated list of the allowed fields, each maybe preceded by "-":
    "-price,created" sorts by both. Fields outside the list, which HTTP drops without a word, are refused."""
    one = "-?(?:" + "|".join(re.escape(name) for name in fields) + ")"
    return {
        "type": "string",
        "pattern": rf"^\s*{one}\s*(?:,\s*{one}\s*)*$",
        "maxLength": sum(len(name) + 2 for name in fields),
        "description": "Sort by these fields, comma-separated; \"-\" before one sorts it descending. Allowed: "
                       + ", ".join(fields) + ".",
    }


def _merge(properties: dict[str, Any], extra: dict[str, Any], origin: str, what: str) -> None:
    for name, schema in extra.items():
        if name in properties:
            raise DeclarationError(f"{origin}: the {what} {name!r} has the same name as a URL keyword or "
                                   "another argument; rename one of them.")
        properties[name] = schema


def call_operation(operation: Operation, arguments: Mapping[str, Any], context: InvocationContext, scope: str) -> Any:
    """Run the view for one call (sync, inside the invocation hop) and return its data."""
    routing = _signature(operation).for_caller(context.principal).routing
    request = _request(operation, routing, arguments, context, scope)
    response = run_view(operation.route.callback, request, _url_kwargs(routing, arguments))
    data = drf_result(response, request)
    raise_for_status(response, data if not isinstance(data, ContentBundle) else None)
    if operation.paginated and isinstance(data, Mapping) and "results" in data:
        data = dict(data)
        data["next_cursor"] = cursor_for_url(data.pop("next", None), scope)
        data["previous_cursor"] = cursor_for_url(data.pop("previous", None), scope)
    return data


def _signature(operation: Operation) -> ViewSignature:
    if operation.signature is None:
        raise RuntimeError("the operation is called before its schema was built")
    return operation.signature


def _url_kwargs(routing: Routing, arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {kwarg: arguments[argument] for argument, kwarg in routing.url.items() if argument in arguments}


def _request(
    operation: Operation, routing: Routing, arguments: Mapping[str, Any], context: InvocationContext, scope: str
) -> Any:
    query = {name: arguments[name] for name in routing.query if name in arguments and name != PAGINATOR_CURSOR}
    if arguments.get(PAGINATOR_CURSOR) and operation.paginated:
        allowed = routing.query | _paginator_keys(operation)
        for key, value in read_cursor(arguments[PAGINATOR_CURSOR], scope):
            if key in allowed:
                query[key] = value
    body = {name: arguments[name] for name in routing.body - routing.files if name in arguments}
    files = {name: uploaded_file(arguments[name], name) for name in routing.files if arguments.get(name) is not None}
    return view_request(
        context, operation.method.upper(), operation.route.url_name, _url_kwargs(routing, arguments), query,
        body if operation.method in BODY_METHODS else None, encoding=routing.encoding, files=files,
    )


def _validates_with_serializer(operation: Operation) -> bool:
    """Whether the operation is a generic mixin's write left as DRF wrote it, whose validation is its
    serializer's alone: the view's errors can then be had without running it."""
    from rest_framework import mixins

    view = operation.view_class
    if operation.method not in GENERIC_WRITES:
        return False
    handlers = [operation.action]
    if operation.method == operation.action:  # an APIView method: DRF's own (generics.CreateAPIView.post) only
        handler = getattr(view, operation.method, None)
        if handler is None or not getattr(handler, "__module__", "").startswith("rest_framework."):
            return False
        handlers = [GENERIC_WRITES[operation.method]]
    for name in handlers:
        mixin = {"create": mixins.CreateModelMixin, "update": mixins.UpdateModelMixin,
                 "partial_update": mixins.UpdateModelMixin}.get(name)
        if mixin is None or not issubclass(view, mixin) or getattr(view, name) is not getattr(mixin, name):
            return False
    return True


def _explain(operation: Operation, refusal: InvalidInput, arguments: Mapping[str, Any], context: InvocationContext,
             routing: Routing) -> InvalidInput:
    """The schema's refusal joined with what the view's serializer says about the same arguments, as over HTTP
    (where the view reports every field at once). Runs the view's permission checks and its object lookup,
    then validates without saving; a refused lookup is answered as the view answers it."""
    problems = list(refusal.details or [])
    url_paths = {f"$.{argument}" for argument in routing.url}
    if any(problem["path"] in url_paths or problem["path"] == "$" for problem in problems):
        return refusal  # the view cannot be reached with these URL arguments
    view_problems = _serializer_errors(operation, routing, arguments, context)
    if not view_problems:
        return refusal
    reported = {problem["path"] for problem in view_problems}
    kept = [problem for problem in problems if problem["path"] not in reported]
    return InvalidInput("The view refused the arguments.",
                        details=sorted([*view_problems, *kept], key=lambda problem: problem["path"]))


def _serializer_errors(operation: Operation, routing: Routing, arguments: Mapping[str, Any],
                       context: InvocationContext) -> list[dict[str, str]]:
    from django.http import Http404
    from rest_framework import exceptions

    kwargs = _url_kwargs(routing, arguments)
    http_request = _request(operation, routing, arguments, context, "")  # the body as the call would send it
    view = operation.view_class(**operation.initkwargs)
    view.setup(http_request, **kwargs)
    view.action, view.format_kwarg, view.headers = operation.action, None, {}
    view.action_map = {operation.method: operation.action}
    request = view.initialize_request(http_request, **kwargs)
    view.request = request
    try:
        view.perform_authentication(request)
        view.check_permissions(request)
        instance = view.get_object() if operation.method in ("put", "patch") else None
        serializer = view.get_serializer(instance, data=request.data, partial=operation.method == "patch")
        serializer.is_valid()
    except Http404:
        raise NotFound("Not found.") from None
    except exceptions.APIException as exc:
        response = view.handle_exception(exc)
        raise_for_status(response, response.data)
        return []
    return field_errors(serializer.errors)


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

