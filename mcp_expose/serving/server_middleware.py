"""What every request passes through on its way to a handler: the client's trace continued, and the SDK's span
given what happened before it opened, internal errors hidden behind an incident id, bad agent chains refused,
legacy sessions remembered, the request state sealed, and questions asked in rounds."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.request_state import RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp_expose.calls.confirmation import StaleConfirmation
from mcp_expose.core import telemetry
from mcp_expose.core.asking import InputRequired, MissingClientCapability
from mcp_expose.core.chain import InvalidChain, read_chain
from mcp_expose.core.conf import get_settings
from mcp_expose.serving.events import Audience
from mcp_expose.serving.request_context import (
    CATALOG_SCOPE_KEY,
    SDK_CALLER,
    session_id_of,
    tool_headers_of,
)
from mcp_expose.serving.sessions import SessionMemory
from mcp_expose.serving.wire import (
    internal_error,
    question_error,
)

Handler = Callable[[ServerRequestContext[Any], Any], Awaitable[Any]]


async def continue_client_trace(ctx: ServerRequestContext[Any], call_next: Any) -> Any:
    """Outside the SDK's span: a client that sends its trace context in a `traceparent` header rather than in
    `_meta` has it continued too (the SDK's span nests under whatever context is current when `_meta` has none)."""
    if ctx.request is None or not telemetry.timed(ctx.request.scope):
        return await call_next(ctx)
    if telemetry.incoming_context(ctx.meta) is not None:
        return await call_next(ctx)
    with telemetry.attached(telemetry.incoming_context(None, ctx.request.headers)):
        return await call_next(ctx)


async def trace_details(ctx: ServerRequestContext[Any], call_next: Any) -> Any:
    """Inside the SDK's span (never a second one): the steps timed at the edge as its children, and the request's
    `mcp.server.operation.duration`."""
    if ctx.request is not None and telemetry.timed(ctx.request.scope):
        telemetry.replay(telemetry.laps_of(ctx.request.scope))
        caller = SDK_CALLER.get()
        if caller is not None and caller.laps:
            laps, caller.laps = caller.laps, []
            telemetry.replay(laps)
    if not telemetry.metering():
        return await call_next(ctx)
    started = time.perf_counter()
    name = ctx.params.get("name") if ctx.params else None
    target = name if isinstance(name, str) else None
    error_type = None
    try:
        result = await call_next(ctx)
    except MCPError as exc:
        error_type = str(exc.error.code)
        raise
    except ValidationError:
        error_type = str(types.INVALID_PARAMS)
        raise
    except BaseException as exc:
        error_type = type(exc).__qualname__
        raise
    else:
        # As the SDK's span tells a tool error: the model, or its wire shape.
        if (isinstance(result, types.CallToolResult) and result.is_error) or (
            isinstance(result, dict) and result.get("isError") is True
        ):
            error_type = "tool_error"
        return result
    finally:
        telemetry.record_operation(started, ctx.method, target, ctx.protocol_version, error_type)


def around_sdk_span(middleware: list[Any], *inside: Any) -> None:
    """Our middleware around what a new SDK server ships in its list (the SDK's `OpenTelemetryMiddleware`, which
    makes the request's span): the client's trace outside it; the details, then `inside` (outermost first), within
    it, so that its span records what they make of an exception."""
    middleware[len(middleware) :] = [trace_details, *inside]
    middleware.insert(0, continue_client_trace)


async def hide_internal_errors(ctx: ServerRequestContext[Any], call_next: Any) -> Any:
    """Every request: an unexpected exception in our handlers reaches the client as a plain internal
    error with an incident id, never as its own text (the 2025-11-25 runner would send that verbatim)."""
    try:
        return await call_next(ctx)
    except (MCPError, ValidationError):
        raise  # protocol errors, and malformed params the SDK answers with -32602
    except Exception:
        raise internal_error(ctx.method) from None


async def remember_session(
    sessions: SessionMemory, audience: Audience | None, ctx: ServerRequestContext[Any], call_next: Any
) -> Any:
    """Stateful 2025-11-25 requests: keep a way to reach the session's standing stream (list changes), and tell
    the change relay which catalog revision the session has seen."""
    session_id = session_id_of(ctx)
    if session_id is not None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        sessions.saw(session_id, ctx.session)
        catalog = ctx.request.scope.get(CATALOG_SCOPE_KEY) if ctx.request is not None else None
        if audience is not None and catalog is not None:
            audience.started_at(catalog.revision)
    return await call_next(ctx)


async def refuse_bad_chains(ctx: ServerRequestContext[Any], call_next: Any) -> Any:
    """Every request: a malformed or too-deep agent chain is refused before anything runs."""
    if ctx.request is not None:
        try:
            read_chain(tool_headers_of(ctx))
        except InvalidChain as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
    return await call_next(ctx)


STREAM_METHODS = frozenset({"subscriptions/listen"})


async def refuse_streams(ctx: ServerRequestContext[Any], call_next: Any) -> Any:
    """Where no stream can be held (the WSGI entry): a method whose answer is a stream is refused, saying how to
    serve it, before the SDK looks for its handler."""
    if ctx.method in STREAM_METHODS:
        raise MCPError(
            code=types.METHOD_NOT_FOUND,
            message=(
                f"{ctx.method} needs a streaming connection, which this server's WSGI entry cannot hold. Serve the "
                "MCP endpoint with mcp_expose.asgi.get_asgi_application() under an ASGI server (uvicorn, daphne, "
                "hypercorn) for change notifications."
            ),
        )
    return await call_next(ctx)


def request_state_security() -> RequestStateSecurity:
    """Keys derived from SECRET_KEY (then SECRET_KEY_FALLBACKS, for rotation): any worker, any restart."""
    from django.conf import settings
    from django.utils.crypto import salted_hmac

    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    keys = [
        salted_hmac("mcp_expose.request-state", "key", secret=secret, algorithm="sha256").digest() for secret in secrets
    ]
    return RequestStateSecurity(keys=keys, ttl=get_settings().CONFIRMATION_TTL)


def asks_in_rounds(handler: Handler) -> Handler:
    """The three methods that may ask the client (tools/call, resources/read, prompts/get), in protocol terms:
    questions become an `input_required` result, an undeclared capability -32021, and a request state
    already used (a replay) or naming a confirmation no longer pending -32602, as the SDK answers a state
    that fails its seal."""

    @functools.wraps(handler)
    async def answered(ctx: ServerRequestContext[Any], params: Any) -> Any:
        try:
            return await handler(ctx, params)
        except InputRequired as exc:
            return exc.as_result()
        except (MissingClientCapability, StaleConfirmation) as exc:
            raise question_error(exc) from None

    return answered
