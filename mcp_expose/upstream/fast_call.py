"""The upstream fast path: a plain `tools/call` to a 2026-07-28 upstream, sent and read without the SDK's client.

Opening the SDK's `Client` for one call (its streams, task groups, dispatcher and session) costs our process
several times the CPU of the call itself. A plain call needs none of it: one POST, one answer. This module is
the whole contract between that shortcut and the SDK's path (`calling._send_once`); the differential test
(`tests/test_upstream_fast_call.py`) holds the two to giving equal results and equal errors over one corpus of
upstream answers, hostile ones included.

- **Plain** (`is_plain`): the era is 2026-07-28 (pinned on the row, or agreed at the last discovery); the
  approved input schema names no `x-mcp-header` argument (whose headers the SDK derives); the caller asked for no
  progress; `FAST_PATH` is on. Anything else (progress, cancellation by the caller's client, every 2025-11-25
  upstream) takes the SDK's client.
- **The request is the SDK's**: its envelope (`_meta` protocol version, client info and capabilities, from the
  SDK's own constants), its headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` through the SDK's encoder),
  through the same pooled transport's checks (the SSRF guard, the pin, the byte bound), over its kept-alive
  HTTP/1.1 connections of its own (`lean_http`: httpx's pool cost more than the rest of the call). It carries no
  progress token.
- **The answer is read as the SDK reads it**: JSON parsed by the SDK's message adapter; an event stream read by
  httpx2's `EventSource` with the SDK's event-size limit, where only `message` events count, notifications are
  passed over (the SDK's path passes them to handlers this call does not set) and the first answer ends it; the
  result checked against the era's wire model (what `mcp_types.methods.validate_server_result` checks) and
  `CallToolResult`, as `ClientSession` does.
- **Failures are raised as the SDK's client raises them** (an `MCPError` with the same code and words, a
  `ValidationError`, the transport's own exception), so `calling._classified` words both paths alike. An HTTP
  error status is returned beside them, as the SDK's path learns it from the shared transport.
- **A redirect is never read here**: the upstream acted on nothing, so the call goes the SDK's way, which follows
  a same-origin redirect and refuses any other.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

import httpx2
import mcp_types as types
from mcp import MCPError
from mcp.client.session import DEFAULT_CLIENT_INFO
from mcp.client.streamable_http import DEFAULT_MAX_SSE_EVENT_SIZE
from mcp.shared.inbound import encode_header_value
from mcp_types import jsonrpc_message_adapter
from mcp_types.methods import SERVER_RESULTS
from pydantic import TypeAdapter

from mcp_expose.core.conf import get_settings
from mcp_expose.core.errors import McpExposeError
from mcp_expose.upstream.lean_http import LEAN

MODERN = "2026-07-28"
REQUEST_ID = 1  # one request per exchange, as the SDK numbers a fresh session's first call
_CLIENT_INFO = DEFAULT_CLIENT_INFO.model_dump(by_alias=True, mode="json", exclude_none=True)
_USER_AGENT = f"python-httpx2/{httpx2.__version__}"
# What `validate_server_result` checks a 2026-07-28 `tools/call` result against, without the dump it then makes.
_WIRE_RESULT: TypeAdapter[Any] = TypeAdapter(cast(Any, SERVER_RESULTS[("tools/call", MODERN)]))


class Redirected(McpExposeError):  # noqa: N818  (a signal to the caller, not an error)
    """The upstream answered with a redirect, unread: the SDK's path decides whether to follow it."""


@dataclass(frozen=True, slots=True)
class FastAnswer:
    """What the exchange gave: the result, or the exception the SDK's path would have raised, and the HTTP error
    status the upstream answered (None below 400)."""

    result: types.CallToolResult | None
    error: BaseException | None
    status: int | None


def is_plain(mode: str, header_arguments: bool, wants_progress: bool) -> bool:
    """Whether a call can take the fast path (see the module's docstring)."""
    return mode == MODERN and not header_arguments and not wants_progress and get_settings().FAST_PATH


def names_header_arguments(input_schema: Any) -> bool:
    """Whether an input schema routes an argument to a header (`x-mcp-header`), anywhere in it."""
    return "x-mcp-header" in json.dumps(input_schema)


def request_for(
    url: str, tool: str, arguments: dict[str, Any], headers: dict[str, str], trace_context: dict[str, str] | None = None
) -> httpx2.Request:
    """The POST the SDK's client sends for this call in 2026-07-28, with `headers` (the row's, the chain's and
    the credentials) beside its own, and the caller's trace context in `_meta` (as the SDK's client puts it)."""
    meta = {
        types.PROTOCOL_VERSION_META_KEY: MODERN,
        types.CLIENT_INFO_META_KEY: _CLIENT_INFO,
        types.CLIENT_CAPABILITIES_META_KEY: {},
        **(trace_context or {}),
    }
    body = {
        "jsonrpc": "2.0",
        "id": REQUEST_ID,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta},
    }
    sent = {
        "user-agent": _USER_AGENT,
        **headers,
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": encode_header_value(tool),
    }
    content = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    return httpx2.Request("POST", _parsed(url), headers=sent, content=content, extensions={LEAN: True})


@lru_cache(maxsize=256)
def _parsed(url: str) -> httpx2.URL:
    """A row's URL parsed once (half the cost of building a request is parsing its URL); URLs are immutable."""
    return httpx2.URL(url)


async def exchange(
    transport: httpx2.AsyncBaseTransport, request: httpx2.Request, *, connect: float, read: float
) -> FastAnswer:
    """Send `request` and read its answer within `read` seconds of sending it. Raises `Redirected`, and what the
    transport raises while connecting (the SDK's path raises the same)."""
    request.extensions["timeout"] = {"connect": connect, "read": read, "write": read, "pool": connect}
    response = await transport.handle_async_request(request)
    response.request = request  # as a client sets it: the event-stream reader and errors name the request
    try:
        async with asyncio.timeout(read):  # asyncio's own (the transport is asyncio's): a third of anyio's cost
            return await _answer(response)
    except TimeoutError:
        return FastAnswer(None, MCPError(types.REQUEST_TIMEOUT, "Request timed out"), None)
    finally:
        await response.aclose()


async def _answer(response: httpx2.Response) -> FastAnswer:
    status = response.status_code
    if 300 <= status < 400 and "location" in response.headers:
        raise Redirected
    if status == 202:
        return _failed(types.INVALID_REQUEST, "server answered a request with 202 Accepted")
    if status >= 400:
        # The SDK's path words an error status by the status alone, whatever the body says.
        return FastAnswer(None, MCPError(types.INTERNAL_ERROR, "Server returned an error response"), status)
    content_type = response.headers.get("content-type", "").lower()
    try:
        if content_type.startswith("application/json"):
            return _from_message(await _json_message(response))
        if content_type.startswith("text/event-stream"):
            return await _from_events(response)
    except (ValueError, MCPError) as exc:  # a ValidationError is a ValueError
        return FastAnswer(None, exc, None)
    return _failed(types.INVALID_REQUEST, f"Unexpected content type: {content_type}")


async def _json_message(response: httpx2.Response) -> types.JSONRPCMessage:
    # The body as it came: never compressed (the transport refuses that), so httpx's decoding layers are skipped.
    stream = response.stream
    assert isinstance(stream, httpx2.AsyncByteStream)  # the transport's own (`transport._Bounded`)
    content = b"".join([chunk async for chunk in stream])
    try:
        return jsonrpc_message_adapter.validate_json(content, by_name=False)
    except ValueError as exc:
        raise MCPError(types.PARSE_ERROR, f"Failed to parse JSON response: {exc}") from None


async def _from_events(response: httpx2.Response) -> FastAnswer:
    """The first answer on the stream: any answer on it is to our one request, as the SDK's path reads it."""
    try:
        async for event in httpx2.EventSource(response, max_event_size=DEFAULT_MAX_SSE_EVENT_SIZE):
            if event.event != "message" or not event.data:
                continue
            try:
                message = jsonrpc_message_adapter.validate_json(event.data, by_name=False)
            except ValueError as exc:
                return _failed(types.PARSE_ERROR, f"Failed to parse SSE message: {exc}")
            if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                message.id = REQUEST_ID
                return _from_message(message)
    except httpx2.SSEError as exc:
        return _failed(types.CONNECTION_CLOSED, f"SSE stream failed: {exc}")
    except Exception:  # noqa: BLE001  (a stream cut mid-way ends as one that ended: so the SDK's path reads it)
        pass
    return _failed(types.CONNECTION_CLOSED, "SSE stream ended without a response")


def _from_message(message: types.JSONRPCMessage) -> FastAnswer:
    if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError) or message.id != REQUEST_ID:
        # Not the answer to our request: the SDK's session waits for one until its read timeout, and words it as
        # a timeout. Nothing else can come on this exchange, so that is said now rather than after the wait.
        return _failed(types.REQUEST_TIMEOUT, "Request timed out")
    if isinstance(message, types.JSONRPCError):
        return FastAnswer(None, MCPError.from_error_data(message.error), None)
    raw = dict(message.result)
    ttl = raw.get("ttlMs")
    if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
        raw["ttlMs"] = 0  # as the SDK floors it
    _WIRE_RESULT.validate_python(raw, by_name=False)  # as `validate_server_result` does, the SDK's check
    return FastAnswer(types.CallToolResult.model_validate(raw, by_name=False), None, None)


def _failed(code: int, message: str) -> FastAnswer:
    return FastAnswer(None, MCPError(code, message), None)
