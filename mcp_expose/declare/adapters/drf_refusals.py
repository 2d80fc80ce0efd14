"""When the schema refuses a generic write, the view's own serializer says why too, as it would over HTTP.

Only for the generic mixins' writes as DRF wrote them, whose validation is the serializer's alone: those can be
validated without saving."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_expose.core.context import InvocationContext
from mcp_expose.core.errors import InvalidInput, NotFound
from mcp_expose.declare.adapters.drf_operations import (
    GENERIC_WRITES,
    Operation,
    Routing,
    url_kwargs,
    view_call_request,
)
from mcp_expose.declare.adapters.http import (
    field_errors,
    raise_for_status,
)


def validates_with_serializer(operation: Operation) -> bool:
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
        mixin = {
            "create": mixins.CreateModelMixin,
            "update": mixins.UpdateModelMixin,
            "partial_update": mixins.UpdateModelMixin,
        }.get(name)
        if mixin is None or not issubclass(view, mixin) or getattr(view, name) is not getattr(mixin, name):
            return False
    return True


def explain_with_view(
    operation: Operation,
    refusal: InvalidInput,
    arguments: Mapping[str, Any],
    context: InvocationContext,
    routing: Routing,
) -> InvalidInput:
    """The schema's refusal joined with what the view's serializer says about the same arguments, as over HTTP
    (where the view reports every field at once). Runs the view's permission checks and its object lookup,
    then validates without saving; a refused lookup is answered as the view answers it."""
    problems = list(refusal.details or [])
    url_paths = {f"$.{argument}" for argument in routing.url}
    if any(problem["path"] in url_paths or problem["path"] == "$" for problem in problems):
        return refusal  # the view cannot be reached with these URL arguments
    view_problems = serializer_errors(operation, routing, arguments, context)
    if not view_problems:
        return refusal
    reported = {problem["path"] for problem in view_problems}
    kept = [problem for problem in problems if problem["path"] not in reported]
    return InvalidInput(
        "The view refused the arguments.", details=sorted([*view_problems, *kept], key=lambda problem: problem["path"])
    )


def serializer_errors(
    operation: Operation, routing: Routing, arguments: Mapping[str, Any], context: InvocationContext
) -> list[dict[str, str]]:
    from django.http import Http404
    from rest_framework import exceptions

    kwargs = url_kwargs(routing, arguments)
    http_request = view_call_request(operation, routing, arguments, context, "")  # the body as the call would send it
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
