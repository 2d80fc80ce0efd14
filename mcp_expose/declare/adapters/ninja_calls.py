"""Call a Django Ninja operation for one MCP call, through Ninja's own machinery, and read its answer.

The request carries the caller (as for DRF views, see `http.view_request`), the query, headers and cookies, and
the body as the operation's media type says. The operation's twin (`ninja_api.mcp_twin`) then runs as over HTTP:
authentication (adapted), throttles, Ninja's parsing and validation of every parameter, the view function, and
the response schema. Its refusals become tool errors:
- a 422 of Ninja's validation: `invalid_input`, with the path of each argument that failed;
- `HttpError` and `Http404`, and every other 4xx: the code of that status, with the operation's message;
- a 5xx, or an exception Ninja does not handle: an internal error (the details go to the log only).

An async operation is awaited on the event loop, without a thread hop. `VIEW_MIDDLEWARE`, a sync chain, runs
around sync operations; with it set, an async operation runs inside it in the worker thread instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from django.http import HttpRequest, HttpResponse

from mcp_expose.core.content import ContentBundle
from mcp_expose.core.context import InvocationContext
from mcp_expose.core.errors import InvalidInput
from mcp_expose.declare.adapters.http import (
    drf_result,
    field_errors,
    raise_for_status,
    request_at_path,
    uploaded_file,
)
from mcp_expose.declare.adapters.middleware import run_view
from mcp_expose.declare.adapters.ninja_api import NinjaOperation
from mcp_expose.declare.adapters.ninja_schema import NinjaRouting, NinjaSignature

# Where Ninja's validation errors say a body field was: its JSON, its form or its files.
BODY_SOURCES = frozenset({"body", "form", "file"})


def call_operation(operation: NinjaOperation, arguments: Mapping[str, Any], context: InvocationContext) -> Any:
    """Run a sync operation for one call (inside the invocation hop) and return its data."""
    routing = _routing(operation)
    request = operation_request(operation, routing, arguments, context)
    response = run_view(as_view(operation, operation.twin.run), request, path_values(routing, arguments))
    return answer(response, request, routing)


async def acall_operation(operation: NinjaOperation, arguments: Mapping[str, Any], context: InvocationContext) -> Any:
    """Await an async operation for one call and return its data."""
    from asgiref.sync import async_to_sync

    from mcp_expose.core.conf import get_settings
    from mcp_expose.core.db import in_worker_thread

    routing = _routing(operation)
    request = operation_request(operation, routing, arguments, context)
    values = path_values(routing, arguments)
    if get_settings().VIEW_MIDDLEWARE:
        view = as_view(operation, async_to_sync(operation.twin.run))
        response = await in_worker_thread(run_view)(view, request, values)
    else:
        response = await operation.twin.run(request, **values)
    return answer(response, request, routing)


def as_view(operation: NinjaOperation, run: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """`run` as the view a middleware's `process_view` is given: a function named after the operation's own (over
    HTTP it would be Ninja's dispatcher for the path), CSRF-exempt as Ninja's views are."""

    def view(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        return run(request, **kwargs)

    function = inspect.unwrap(operation.bound.view_func)
    view.__name__ = view.__qualname__ = getattr(function, "__name__", "ninja_operation")
    view.__module__ = getattr(function, "__module__", __name__)
    view.csrf_exempt = True  # type: ignore[attr-defined]
    return view


def operation_request(
    operation: NinjaOperation, routing: NinjaRouting, arguments: Mapping[str, Any], context: InvocationContext
) -> HttpRequest:
    """The request the operation gets, at its own path under the API's mount."""
    path = operation.mount.rstrip("/") + _filled(operation.path, routing, arguments)
    body = {
        name: arguments[argument]
        for argument, name in routing.of("body").items()
        if argument not in routing.files and argument in arguments
    }
    files = {
        name: _uploads(arguments[argument], argument)
        for argument, name in routing.of("body").items()
        if argument in routing.files and arguments.get(argument) is not None
    }
    request = request_at_path(
        context,
        operation.method.upper(),
        path,
        {name: arguments[argument] for argument, name in routing.of("query").items() if argument in arguments},
        body if routing.has_body else None,
        encoding=routing.encoding,
        files=files,
        parse_multipart=True,  # Ninja's Form and File parameters read request.POST and request.FILES
    )
    for argument, name in routing.of("header").items():
        if arguments.get(argument) is not None:
            request.META["HTTP_" + name.upper().replace("-", "_")] = str(arguments[argument])
    for argument, name in routing.of("cookie").items():
        if arguments.get(argument) is not None:
            request.COOKIES[name] = str(arguments[argument])
    return request


def path_values(routing: NinjaRouting, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The path parameters, as Django's URL resolver hands them to the view: strings, converted by the
    operation's own path schema."""
    return {name: str(arguments[argument]) for argument, name in routing.of("path").items() if argument in arguments}


def answer(response: HttpResponse, request: HttpRequest, routing: NinjaRouting) -> Any:
    """The operation's data, or the tool error its refusal means."""
    data = drf_result(response, request)
    plain = data if not isinstance(data, ContentBundle) else None
    if response.status_code == 422 and isinstance(plain, Mapping) and isinstance(plain.get("detail"), list):
        raise InvalidInput("The operation refused the arguments.", details=validation_paths(plain["detail"], routing))
    if response.status_code == 400 and isinstance(plain, Mapping) and isinstance(plain.get("detail"), str):
        raise InvalidInput(plain["detail"], details=field_errors(plain))
    raise_for_status(response, plain)
    return data


def validation_paths(errors: list[Any], routing: NinjaRouting) -> list[dict[str, str]]:
    """Ninja's validation errors (`loc`: the source, then the parameter's path) as argument paths: the first
    part of a `loc` that is an argument's name starts the path (a body schema's own parameter name, or a
    `Query[Schema]`'s, is not one)."""
    problems = []
    for error in errors:
        location = error.get("loc") if isinstance(error, Mapping) else None
        message = str(error.get("msg", "Not valid.")) if isinstance(error, Mapping) else str(error)
        path = "$"
        if isinstance(location, (list, tuple)) and location:
            source = "body" if location[0] in BODY_SOURCES else str(location[0])
            names = {name: argument for argument, name in routing.of(source).items()}
            rest = list(location[1:])
            for index, part in enumerate(rest):
                if part in names:
                    path = (
                        "$."
                        + names[part]
                        + "".join(f"[{item}]" if isinstance(item, int) else f".{item}" for item in rest[index + 1 :])
                    )
                    break
        problems.append({"path": path, "message": message})
    return problems


def _filled(path: str, routing: NinjaRouting, arguments: Mapping[str, Any]) -> str:
    for argument, name in routing.of("path").items():
        if argument in arguments:
            path = path.replace("{" + name + "}", quote(str(arguments[argument]), safe=""))
    return path


def _uploads(value: Any, argument: str) -> Any:
    if isinstance(value, list):
        return [uploaded_file(item, f"{argument}[{index}]") for index, item in enumerate(value)]
    return uploaded_file(value, argument)


def _routing(operation: NinjaOperation) -> NinjaRouting:
    signature = operation.signature
    if not isinstance(signature, NinjaSignature):
        raise RuntimeError("the operation is called before its schema was built")
    return signature.routing
