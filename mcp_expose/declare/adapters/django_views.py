"""Expose plain Django views (functions and class-based views) as tools.

The view runs with the caller as `request.user`, so `login_required`,
`permission_required` and the mixins behave as they do for a person. HTML comes
back as text (optionally just the page's <main>), JSON as data, a form's
validation errors as `invalid_input`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_expose.core.context import InvocationContext
from mcp_expose.core.errors import AccessDenied, DeclarationError, InvalidInput
from mcp_expose.declare.adapters.field_schema import form_input_schema
from mcp_expose.declare.adapters.http import (
    is_login_redirect,
    raise_for_status,
    redirect_location,
    response_data,
    view_request,
)
from mcp_expose.declare.adapters.middleware import run_view
from mcp_expose.declare.adapters.routes import Route
from mcp_expose.declare.json_schemas import capped_parameters, object_schema

QUERY_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


@dataclass
class ViewOperation:
    route: Route
    method: str
    view: Any
    html: str
    query_params: Mapping[str, Any]
    kwarg_names: frozenset[str] = frozenset()
    query_names: frozenset[str] = frozenset()
    body_names: frozenset[str] = frozenset()
    extra: dict[str, Any] = field(default_factory=dict)


def default_methods(view: Any) -> list[str]:
    """GET for views that show things; POST for views that take a form."""
    from django.views.generic.edit import DeletionMixin, ProcessFormView

    if isinstance(view, type) and issubclass(view, ProcessFormView | DeletionMixin):
        return ["post"]
    return ["get"]


def query_param_schema(name: str, spec: Any) -> dict[str, Any]:
    """`query_params={"q": "Words to search", "page": int, "year": (int, "Publication year")}`."""
    if isinstance(spec, str):
        return {"type": "string", "description": spec}
    if isinstance(spec, tuple) and len(spec) == 2:
        kind, description = spec
        return {"type": QUERY_TYPES[kind], "description": description}
    if spec in QUERY_TYPES:
        return {"type": QUERY_TYPES[spec]}
    if isinstance(spec, dict):
        return dict(spec)
    raise DeclarationError(
        f"query parameter {name!r}: give a description, a type (str, int, float, bool), "
        "a (type, description) pair or a JSON schema."
    )


def operation_schema(operation: ViewOperation, origin: str) -> dict[str, Any]:
    properties = capped_parameters(operation.route.kwarg_properties())
    required = list(properties)
    operation.kwarg_names = frozenset(properties)
    query = capped_parameters({name: query_param_schema(name, spec) for name, spec in operation.query_params.items()})
    paginate_by = getattr(operation.view, "paginate_by", None)
    if operation.method == "get" and paginate_by and "page" not in query:
        query["page"] = {"type": "integer", "minimum": 1, "description": f"Page number ({paginate_by} per page)."}
    body: dict[str, Any] = {}
    form_class = getattr(operation.view, "form_class", None)
    if operation.method == "post" and form_class is None and getattr(operation.view, "fields", None):
        from django.forms import modelform_factory

        form_class = modelform_factory(operation.view.model, fields=operation.view.fields)
    if operation.method == "post" and form_class is not None:
        form_schema = form_input_schema(form_class, origin=origin)
        body = form_schema["properties"]
        required.extend(form_schema.get("required", []))
    for name, schema in {**query, **body}.items():
        if name in properties:
            raise DeclarationError(f"{origin}: the argument {name!r} is declared twice (URL, query or form).")
        properties[name] = schema
    operation.query_names = frozenset(query)
    operation.body_names = frozenset(body)
    return object_schema(properties, required)


def call_view(operation: ViewOperation, arguments: Mapping[str, Any], context: InvocationContext) -> Any:
    kwargs = {name: arguments[name] for name in operation.kwarg_names if name in arguments}
    query = {name: arguments[name] for name in operation.query_names if name in arguments}
    body = {name: arguments[name] for name in operation.body_names if name in arguments}
    request = view_request(
        context,
        operation.method.upper(),
        operation.route.url_name,
        kwargs,
        query,
        body if operation.method == "post" else None,
        encoding="form",
    )
    response = run_view(operation.route.callback, request, kwargs)
    location = redirect_location(response)
    if location is not None:
        if is_login_redirect(location):
            raise AccessDenied("This page needs a signed-in user with access to it.")
        return {"status": response.status_code, "redirect": location}
    _raise_for_form_errors(response)
    data = response_data(response, operation.html)
    raise_for_status(response, data if isinstance(data, Mapping) else None)
    return data


def _raise_for_form_errors(response: Any) -> None:
    """A form view that re-renders its form with errors is telling the caller the input was wrong."""
    context_data = getattr(response, "context_data", None) or {}
    form = context_data.get("form")
    if form is not None and form.is_bound and form.errors:
        details = [
            {"path": "$" if name == "__all__" else f"$.{name}", "message": str(message)}
            for name, messages in form.errors.items()
            for message in messages
        ]
        raise InvalidInput("The form refused the arguments.", details=details)
