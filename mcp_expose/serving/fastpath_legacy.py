"""The fast path's 2025-11-25 half: plain stateless legacy exchanges, answered as the SDK's stateless transport
answers them.

A stateless 2025-11-25 client opens every conversation with `initialize` and `notifications/initialized`, then
sends `tools/list`, `tools/call` and `ping`, each as its own POST. On the SDK's path each POST builds a transport,
a task group, memory streams, a dispatcher and a runner, and answers in an event stream (or JSON in JSON mode).
Here the same answers are written directly:

- `initialize` and `ping` always answer the same for the same protocol versions, so the SDK's first answer is
  kept (as listings are) and served as bytes afterwards;
- `notifications/initialized` is acknowledged with the SDK's empty 202, which is all the SDK does with it on a
  stateless connection;
- `tools/list` and `tools/call` go to `fastpath`, as on 2026-07-28, in this era's shape.

"Plain" is the SDK's transport and runner checks in order: Content-Type, Accept, the body as the SDK parses it,
the JSON-RPC envelope, the per-version wire surface, the params model; plus our agent-chain check. Stateful
sessions (`LEGACY_SESSIONS`), any other version header, any other method, and anything those checks refuse are
answered by the SDK.

The whole contract with the SDK's path is written in `fastpath_contract`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import mcp_types as types
import pydantic_core
from mcp_types import DEFAULT_NEGOTIATED_VERSION, JSONRPCNotification, JSONRPCRequest, jsonrpc_message_adapter
from mcp_types import methods as wire_methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.types import Receive, Send

from mcp_expose.core.chain import read_chain
from mcp_expose.serving.fastpath_replies import answered_unless_gone
from mcp_expose.serving.fastpath_requests import (
    _CONTENT_TYPE_CHECK,
    LATER_ROUNDS,
    PARAMS_MODELS,
    UNCACHED_META_KEYS,
    PlainRequest,
    accepted,
    sdk_pieces,
)

LEGACY = "2025-11-25"
INITIALIZED = "notifications/initialized"
# What a stateless exchange carries besides tools: the handshake (answered the same every time) and pings.
CONSTANT_METHODS: dict[str, type[BaseModel] | None] = {"initialize": types.InitializeRequestParams, "ping": None}
# The SDK's event streams for this era (sse-starlette's) ping every 15 seconds.
LEGACY_PING_INTERVAL = 15.0
ACCEPTED_HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"0")]

SendLog = Callable[[str, Any], Awaitable[None]]


def is_legacy_candidate(method: str, headers: Mapping[str, str], sessions: bool) -> bool:
    """Cheap first look, before the body is read: a stateless 2025-11-25 POST (or one with no version header,
    which only an `initialize` may be)."""
    return method == "POST" and not sessions and headers.get("mcp-protocol-version", LEGACY) == LEGACY


async def plain_legacy_request(
    scope: Any, headers: Mapping[str, str], body: bytes, json_response: bool
) -> PlainRequest | None:
    """The request, when the SDK's stateless legacy path would answer it plainly; else None (the SDK answers it)."""
    request = Request(scope)
    if await _CONTENT_TYPE_CHECK.validate_request(request, is_post=True) is not None:
        return None
    if not accepted(request, json_response) or not _json_content_type(headers.get("content-type", "")):
        return None
    try:
        message = jsonrpc_message_adapter.validate_python(pydantic_core.from_json(body), by_name=False)
    except (ValueError, ValidationError):
        return None
    header = headers.get("mcp-protocol-version")
    version = header or DEFAULT_NEGOTIATED_VERSION  # as the SDK seeds a stateless connection
    try:
        chain = read_chain(headers)
    except Exception:  # noqa: BLE001  (InvalidChain, or anything else: the SDK path answers it)
        return None
    if isinstance(message, JSONRPCNotification):
        if message.method != INITIALIZED or header != LEGACY:
            return None
        return PlainRequest(INITIALIZED, b"", {}, chain, version)
    if not isinstance(message, JSONRPCRequest) or (header is None and message.method != "initialize"):
        return None
    method, params = message.method, message.params
    if method not in PARAMS_MODELS and method not in CONSTANT_METHODS:
        return None
    try:
        wire_methods.validate_client_request(method, version, params)
        model = PARAMS_MODELS.get(method) or CONSTANT_METHODS.get(method)
        typed = model.model_validate({} if params is None else params, by_name=False) if model else None
    except Exception:  # noqa: BLE001  (anything the SDK would refuse, however it says so: the SDK answers)
        return None
    meta = (params or {}).get("_meta") or {}
    if not isinstance(meta, Mapping) or UNCACHED_META_KEYS & set(meta):
        return None
    if any(getattr(typed, name, None) is not None for name in LATER_ROUNDS):
        return None
    return PlainRequest(method, pydantic_core.to_json(message.id), params or {}, chain, version)


def _json_content_type(content_type: str) -> bool:
    """The stateless transport's own Content-Type rule, after the security middleware's."""
    return "application/json" in (part.strip() for part in content_type.split(";")[0].split(","))


def constant_key(plain: PlainRequest) -> tuple[str, ...]:
    """What an `initialize` or `ping` answer depends on: the connection's version, and the one negotiated."""
    if plain.method != "initialize":
        return ("constant", plain.method, plain.version)
    requested = plain.params.get("protocolVersion")
    negotiated = requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
    return ("constant", plain.method, plain.version, str(negotiated))


async def send_accepted(send: Send) -> None:
    """The SDK's answer to a notification: 202 and no body."""
    await send({"type": "http.response.start", "status": 202, "headers": ACCEPTED_HEADERS})
    await send({"type": "http.response.body", "body": b""})


async def send_event(body: bytes, send: Send) -> None:
    """A whole answer as this era's SDK writes it in SSE mode: a stream of the one message."""
    await send({"type": "http.response.start", "status": 200, "headers": sdk_pieces().sse_headers})
    await send({"type": "http.response.body", "body": _event(body), "more_body": False})


def _event(data: bytes) -> bytes:
    return b"event: message\r\ndata: " + data + b"\r\n\r\n"


def log_notification(level: str, data: Any) -> bytes:
    """A log message as the SDK writes it on a request's stream."""
    params = types.LoggingMessageNotificationParams(level=level, data=data)  # type: ignore[arg-type]
    return (
        JSONRPCNotification(
            jsonrpc="2.0", method="notifications/message", params=params.model_dump(by_alias=True, exclude_none=True)
        )
        .model_dump_json(by_alias=True, exclude_unset=True)
        .encode()
    )


async def answer_as_event_stream(
    call: Callable[[SendLog], Awaitable[tuple[int, bytes]]], receive: Receive, send: Send
) -> None:
    """As the SDK answers a legacy call in SSE mode: the stream opens at once, the call's log messages ride it,
    a comment pings it every interval, the answer ends it; a client that goes away cancels the call."""
    loop = asyncio.get_running_loop()
    pinger: asyncio.Task[None] | None = None
    writing = asyncio.Lock()

    async def write(chunk: bytes) -> None:
        async with writing:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def keep_pinging() -> None:
        while True:
            await write(f": ping - {datetime.now(UTC)}\r\n\r\n".encode())
            await asyncio.sleep(LEGACY_PING_INTERVAL)

    def start_pinging() -> None:
        nonlocal pinger
        pinger = loop.create_task(keep_pinging())

    async def log(level: str, data: Any) -> None:
        await write(_event(log_notification(level, data)))

    await send({"type": "http.response.start", "status": 200, "headers": sdk_pieces().sse_headers})
    timer = loop.call_later(LEGACY_PING_INTERVAL, start_pinging)
    try:
        answer = await answered_unless_gone(call(log), receive)
    finally:
        timer.cancel()
        if pinger is not None:
            pinger.cancel()
    if answer is not None:
        async with writing:  # after a ping being written, if one is
            await send({"type": "http.response.body", "body": _event(answer[1]), "more_body": False})
