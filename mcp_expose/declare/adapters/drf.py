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
from functools import partial
from types import MappingProxyType
from typing import Any

from mcp_expose.core.content import ContentBundle
from mcp_expose.core.context import InvocationContext
from mcp_expose.core.errors import DeclarationError
from mcp_expose.core.principal import Principal
from mcp_expose.declare.adapters.caller_schemas import CallerReads, CallerSchemas, ViewSignature
from mcp_expose.declare.adapters.cursors import CURSOR_MAX_LENGTH, cursor_for_url
from mcp_expose.declare.adapters.drf_operations import (
    BODY_METHODS,
    PAGINATOR_CURSOR,
    Operation,
    Routing,
    url_kwargs,
    view_call_request,
    view_instance,
)
from mcp_expose.declare.adapters.drf_query import (
    component_parameters,
    describe_ordering,
)
from mcp_expose.declare.adapters.drf_refusals import explain_with_view, validates_with_serializer
from mcp_expose.declare.adapters.field_schema import serializer_input_schema
from mcp_expose.declare.adapters.http import (
    drf_result,
    raise_for_status,
)
from mcp_expose.declare.adapters.lookups import lookup_schema
from mcp_expose.declare.adapters.middleware import run_view
from mcp_expose.declare.json_schemas import capped_parameters, object_schema

logger = logging.getLogger("mcp_expose.views")


def build_signature(operation: Operation, origin: str) -> ViewSignature:
    """The operation's signature: one schema for everyone, or (when the serializer choice reads who is
    asking) a schema per caller, see `caller_schemas`."""
    reads: set[str] = set()
    schema, routing = operation_schema(operation, origin, None, reads)
    explainer = partial(explain_with_view, operation) if validates_with_serializer(operation) else None
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
    view = view_instance(operation, principal)
    url_schemas = {
        name: lookup_schema(operation.view_class, name, schema)
        for name, schema in operation.route.kwarg_properties().items()
    }
    capped_parameters(url_schemas)
    query: dict[str, Any] = {}
    is_list = operation.method == "get" and not operation.is_detail
    if is_list:
        for backend_class in getattr(view, "filter_backends", []):
            query.update(component_parameters(backend_class(), view))
        describe_ordering(view, query)
        paginator = getattr(view, "paginator", None)
        if paginator is not None:
            operation.paginated = True
            query.update(
                {
                    name: schema
                    for name, schema in component_parameters(paginator, view).items()
                    if name != PAGINATOR_CURSOR
                }
            )
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
            raise DeclarationError(
                f"{origin}: the URL keyword {name!r} and the arguments {name!r} and {argument!r} "
                "clash; rename one of them."
            )
        properties[argument] = {**schema, "description": f"The {name} in the URL."}
        url[argument] = name
    required = list(properties)
    _merge(properties, query, origin, "query parameter")
    _merge(properties, body, origin, "serializer field")
    required.extend(name for name in body_required if name not in required)
    routing = Routing(
        url=MappingProxyType(url),
        query=frozenset(query),
        body=frozenset(body),
        files=frozenset(files),
        encoding=encoding,
    )
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
    takes = {
        kind
        for kind, base in (("json", JSONParser), ("multipart", MultiPartParser), ("form", FormParser))
        if any(issubclass(parser, base) for parser in parsers)
    }
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


def _merge(properties: dict[str, Any], extra: dict[str, Any], origin: str, what: str) -> None:
    for name, schema in extra.items():
        if name in properties:
            raise DeclarationError(
                f"{origin}: the {what} {name!r} has the same name as a URL keyword or "
                "another argument; rename one of them."
            )
        properties[name] = schema


def call_operation(operation: Operation, arguments: Mapping[str, Any], context: InvocationContext, scope: str) -> Any:
    """Run the view for one call (sync, inside the invocation hop) and return its data."""
    routing = _signature(operation).for_caller(context.principal).routing
    request = view_call_request(operation, routing, arguments, context, scope)
    response = run_view(operation.route.callback, request, url_kwargs(routing, arguments))
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
