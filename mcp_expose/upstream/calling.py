"""A call to an upstream tool: pinned to the server row it was discovered on, checked and bounded both ways.

The arguments were checked against the approved input schema by the dispatcher (the capability's signature is
that schema) before this runs. Here the call is refused before it leaves when the breaker is open or the chain
would be too deep; it goes to the row's URL under the upstream's own tool name, with the row's headers and this
call's depth and conversation (never the caller's credentials); and what comes back passes `results.read_result`.
Whatever the upstream does ends as a value or a `ToolError` the model can read: never an exception of ours.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from pydantic import ValidationError

from mcp_expose.core import telemetry
from mcp_expose.core.conf import get_settings
from mcp_expose.core.context import InvocationContext
from mcp_expose.core.db import in_worker_thread
from mcp_expose.core.errors import McpExposeError, ToolError, UpstreamError, UpstreamUnavailable
from mcp_expose.upstream.breaker import CircuitBreaker
from mcp_expose.upstream.client_credentials import TokenUnavailable, tokens
from mcp_expose.upstream.discovery import UpstreamTarget, describe_failure
from mcp_expose.upstream.fast_call import Redirected, exchange, is_plain, request_for
from mcp_expose.upstream.legacy_sessions import sessions
from mcp_expose.upstream.pool import pool
from mcp_expose.upstream.quiet_sdk import talking_to
from mcp_expose.upstream.results import OutputCheck, error_text, read_result
from mcp_expose.upstream.transport import UpstreamRefused

logger = logging.getLogger("mcp_expose.upstream")
# Checking an answer runs the approved output schema's patterns: off the event loop, and abandoned with its call.
_read_in_thread = in_worker_thread(read_result, abandon_on_cancel=True)

MODERN = "2026-07-28"


class UpstreamTimeout(ToolError):
    code = "timeout"

    def __init__(self, server: str, seconds: float) -> None:
        super().__init__(
            f"The upstream server {server!r} did not answer within {seconds:g} seconds; the call to it was "
            "cancelled. Whether it acted on it is for that server to say.",
            details={"timeout_seconds": seconds, "upstream": server},
        )


@dataclass(frozen=True)
class UpstreamCall:
    """What a served upstream tool calls: the server's row (as a target), the upstream's own name for the tool,
    and the approved output schema, if any."""

    target: UpstreamTarget
    tool: str
    output: OutputCheck | None = None
    # The era the last discovery agreed on ("" for none yet): the call adopts it without asking again.
    protocol_version: str = ""
    # Whether the approved input schema routes an argument to a header (then the SDK's client builds the call).
    header_arguments: bool = False

    @property
    def mode(self) -> str:
        if self.target.protocol == "2025-11-25":
            return "legacy"
        if self.target.protocol == MODERN or self.protocol_version == MODERN:
            return MODERN
        return "legacy" if self.protocol_version else "auto"


_BREAKER: CircuitBreaker | None = None


def breaker() -> CircuitBreaker:
    """This process's breaker for upstream servers (per process: see `upstream.breaker`), made again when its
    settings change."""
    global _BREAKER
    conf = get_settings()
    if _BREAKER is None or (_BREAKER.threshold, _BREAKER.cooldown) != (
        conf.UPSTREAM_BREAKER_THRESHOLD,
        conf.UPSTREAM_BREAKER_COOLDOWN,
    ):
        _BREAKER = CircuitBreaker(conf.UPSTREAM_BREAKER_THRESHOLD, conf.UPSTREAM_BREAKER_COOLDOWN)
    return _BREAKER


class _Failed(McpExposeError):
    """The upstream could not be used for this call (counted by the breaker); `error` is the answer."""

    def __init__(self, error: ToolError) -> None:
        self.error = error


async def call_upstream(call: UpstreamCall, arguments: dict[str, Any], context: InvocationContext) -> Any:
    """Call the tool and return its result as a local tool's value; raise a `ToolError` otherwise."""
    target = call.target
    headers = context.outbound_headers()  # DepthExceeded (a tool error) before anything leaves
    guard = breaker()
    wait = guard.retry_after(target.pk)
    if wait is not None:
        raise UpstreamUnavailable(
            f"The upstream server {target.name!r} failed repeatedly just now; calls to it resume in "
            f"{math.ceil(wait)} s.",
            server=target.name,
            retry_after=math.ceil(wait),
        )
    started = time.perf_counter()
    error_type: str | None = None
    try:
        result = await _send(call, arguments, headers, context)
    except _Failed as failed:
        error_type = failed.error.code
        if guard.failed(target.pk):
            logger.warning("Upstream %s: circuit opened after repeated failures", target.name)
        raise failed.error from None
    except ToolError as exc:
        error_type = exc.code
        guard.succeeded(target.pk)  # an error the upstream answered: it is up
        raise
    except BaseException as exc:
        error_type = type(exc).__qualname__
        guard.released(target.pk)  # cancelled (or our own fault): says nothing of the upstream
        raise
    finally:
        _measure(started, call, error_type)
    guard.succeeded(target.pk)
    if call.output is None:
        return read_result(result, target.name, None)  # bounded blocks, no schema: quick enough for the loop
    return await _read_in_thread(result, target.name, call.output)


def _measure(started: float, call: UpstreamCall, error_type: str | None) -> None:
    """The call's `mcp.client.operation.duration` (an upstream's tool error is a result, not an error type)."""
    if not telemetry.metering():
        return
    attributes = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": call.tool,
        "mcp_expose.upstream.server": call.target.name,
    }
    if error_type is not None:
        attributes["error.type"] = error_type
    telemetry.client_operation_duration.record(time.perf_counter() - started, attributes)


def _error_type(error: BaseException) -> str:
    """An upstream's failure as a span's error type: its JSON-RPC code (an integer the upstream chose: bounded to
    what JSON-RPC codes are), or the exception's kind."""
    if not isinstance(error, MCPError):
        return type(error).__qualname__
    code = error.error.code
    return str(code) if -(2**31) <= code < 2**31 else "invalid_error_code"


def _breaker_states() -> list[tuple[float, dict[str, Any]]]:
    """1 for each upstream whose breaker is open (refusing calls), 0 when half-open or closed again."""
    return [
        (1.0 if state == "open" else 0.0, {"mcp_expose.upstream.server_id": server})
        for server, state in breaker().states().items()
    ]


telemetry.observe(
    "mcp_expose.upstream.breaker.open",
    _breaker_states,
    unit="1",
    description="Whether this process's circuit breaker for an upstream server is open (1) or not (0).",
)


async def _send(
    call: UpstreamCall, arguments: dict[str, Any], headers: dict[str, str], context: InvocationContext
) -> types.CallToolResult:
    """The call, once; a client-credentials upstream that refuses its cached token gets one new token and the
    call again (the token may have been revoked before it expired)."""
    target = call.target
    try:
        return await _send_once(call, arguments, {**headers, **await _authorization(target)}, context)
    except _Refused401:
        if target.oauth is None:
            raise _Failed(_unauthorised(target)) from None
        tokens.forget(target.pk)
    try:
        return await _send_once(call, arguments, {**headers, **await _authorization(target)}, context)
    except _Refused401:
        raise _Failed(_unauthorised(target)) from None


async def _authorization(target: UpstreamTarget) -> dict[str, str]:
    try:
        return await target.authorization()
    except TokenUnavailable as exc:
        raise _Failed(_unavailable(target, str(exc))) from None


class _Refused401(McpExposeError):
    pass


def _unauthorised(target: UpstreamTarget) -> ToolError:
    return _unavailable(target, "it refused this server's credentials (HTTP 401); an administrator must renew them")


def _unavailable(target: UpstreamTarget, cause: str) -> UpstreamUnavailable:
    return UpstreamUnavailable(
        f"The upstream server {target.name!r} could not be used: {cause}",
        server=target.name,
        retry_after=int(get_settings().UPSTREAM_BREAKER_COOLDOWN),
    )


async def _send_once(
    call: UpstreamCall, arguments: dict[str, Any], headers: dict[str, str], context: InvocationContext
) -> types.CallToolResult:
    if is_plain(call.mode, call.header_arguments, context.wants_progress):
        try:
            return await _send_fast(call, arguments, headers)
        except Redirected:
            pass  # nothing was acted on: the SDK's client follows a same-origin redirect, and refuses the rest
    return await _send_through_sdk(call, arguments, headers, context)


async def _send_fast(call: UpstreamCall, arguments: dict[str, Any], headers: dict[str, str]) -> types.CallToolResult:
    """The call as `fast_call` makes it, failing exactly as `_send_through_sdk` fails."""
    target = call.target
    try:
        with telemetry.client_span("tools/call", call.tool, MODERN, target.name) as trace_context:
            request = request_for(target.url, call.tool, arguments, {**target.headers, **headers}, trace_context)
            # asyncio's own timeout, as the fast path's transport is asyncio's (anyio's costs three times as much).
            with talking_to(target.name):
                async with (
                    asyncio.timeout(target.connect_timeout + target.call_timeout),
                    pool.leased(target) as transport,
                ):
                    answer = await exchange(
                        transport, request, connect=target.connect_timeout, read=target.call_timeout
                    )
            if answer.error is not None:
                telemetry.failed(_error_type(answer.error))
    except Redirected:
        raise
    except TimeoutError:
        raise _Failed(UpstreamTimeout(target.name, target.call_timeout)) from None
    except Exception as exc:  # noqa: BLE001  (whatever the upstream does ends here, as a tool error)
        raise _classified(exc, call, None) from None
    if answer.status == 401:
        raise _Refused401
    if answer.error is not None:
        raise _classified(answer.error, call, answer.status) from None
    assert answer.result is not None  # an answer is a result or an error
    return answer.result


async def _send_through_sdk(
    call: UpstreamCall, arguments: dict[str, Any], headers: dict[str, str], context: InvocationContext
) -> types.CallToolResult:
    target = call.target

    async def forward_progress(progress: float, total: float | None, message: str | None) -> None:
        await context.report_progress(progress, total, message[:500] if message else None)

    async def send(client: Client) -> types.CallToolResult:
        request = types.CallToolRequest(params=types.CallToolRequestParams(name=call.tool, arguments=arguments))
        return await client.session.send_request(
            request,
            types.CallToolResult,
            request_read_timeout_seconds=target.call_timeout,
            progress_callback=forward_progress if context.wants_progress else None,
        )

    if call.mode == "legacy":
        return await _send_in_session(call, headers, send)
    async with pool.leased(target) as transport:
        try:
            http, shared = pool.http_client(target, transport, headers)
        except Exception as exc:  # noqa: BLE001  (a header the HTTP client cannot send, say)
            raise _Failed(_unavailable(target, describe_failure(exc, target))) from None
        return await _send_with(call, http, shared, send)


async def _send_with(
    call: UpstreamCall, http: httpx2.AsyncClient, shared: Any, send: Callable[[Client], Awaitable[types.CallToolResult]]
) -> types.CallToolResult:
    """A call over a client of its own (a session opened and closed around it, as the era under "auto" is not yet
    known), failing as every call fails."""
    target = call.target
    try:
        with talking_to(target.name), anyio.fail_after(target.connect_timeout + target.call_timeout):
            async with Client(streamable_http_client(target.url, http_client=http), mode=call.mode) as client:
                return await send(client)
    except TimeoutError:
        raise _Failed(UpstreamTimeout(target.name, target.call_timeout)) from None
    except Exception as exc:  # noqa: BLE001  (whatever the upstream does ends here, as a tool error)
        if shared.error_status == 401:
            raise _Refused401 from None
        raise _classified(exc, call, shared.error_status) from None


async def _send_in_session(
    call: UpstreamCall, headers: dict[str, str], send: Callable[[Client], Awaitable[types.CallToolResult]]
) -> types.CallToolResult:
    """A 2025-11-25 call over the upstream's pooled session (`legacy_sessions`), failing as a call of its own."""
    target = call.target
    try:
        with talking_to(target.name), anyio.fail_after(target.connect_timeout + target.call_timeout):
            result, failure, status = await sessions.call(target, headers, send)
    except TimeoutError:
        raise _Failed(UpstreamTimeout(target.name, target.call_timeout)) from None
    if failure is None:
        assert result is not None  # a call ends in a result or a failure
        return result
    if status == 401:
        raise _Refused401
    if isinstance(failure, TimeoutError):
        raise _Failed(UpstreamTimeout(target.name, target.call_timeout))
    raise _classified(failure, call, status)


async def close_connections() -> None:
    """Everything this event loop holds open to upstreams: the 2025-11-25 sessions first (each ends with its
    DELETE, over its pool), then the pools."""
    await sessions.aclose()
    await pool.aclose()


def _classified(exc: BaseException, call: UpstreamCall, status: int | None) -> Exception:
    """A failure as the tool error it is: an error the upstream answered (not the upstream's fault, so not
    counted), or the upstream unusable (counted by the breaker). Nothing the upstream sent is quoted but its
    own error message, bounded."""
    target = call.target
    inner = exc
    while isinstance(inner, BaseExceptionGroup) and inner.exceptions:
        inner = inner.exceptions[0]
    code = inner.error.code if isinstance(inner, MCPError) else None
    if code == types.REQUEST_TIMEOUT or (
        isinstance(inner, httpx2.TimeoutException) and not isinstance(inner, httpx2.ConnectTimeout)
    ):
        return _Failed(UpstreamTimeout(target.name, target.call_timeout))
    if status is None and (code == types.PARSE_ERROR or isinstance(inner, ValidationError | UpstreamRefused)):
        why = describe_failure(inner, target) if not isinstance(inner, MCPError) else "it is not JSON-RPC"
        return _Failed(_upstream_error(target, f"answered what cannot be read: {why}"))
    if isinstance(inner, MCPError) and status is None and code != types.CONNECTION_CLOSED:
        message = error_text([types.TextContent(text=str(inner.error.message))])[:500]
        return _upstream_error(target, f"refused the call: {message} (JSON-RPC {code})")
    cause = (
        "the connection closed before the answer"
        if code == types.CONNECTION_CLOSED and status is None
        else describe_failure(inner, target, status)
    )
    return _Failed(_unavailable(target, cause))


def _upstream_error(target: UpstreamTarget, what: str) -> UpstreamError:
    return UpstreamError(
        f"The upstream server {target.name!r} {what}", details={"source": "upstream", "upstream": target.name}
    )
