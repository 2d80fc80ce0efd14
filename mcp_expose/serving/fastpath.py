"""The one place mcp_expose answers protocol requests itself: plain `tools/list` and `tools/call`, on 2026-07-28
and on stateless 2025-11-25 (with the rest of a stateless legacy exchange, `fastpath_legacy`).

A listing depends only on the catalog revision and on what the caller may see, so the answer is
encoded once per (revision, visibility) and served as bytes afterwards, with the request's id
spliced in. The first answer for each is produced by the SDK itself and captured from the wire, so
what the fast path serves is byte for byte what the SDK would have sent.

A call runs through the same dispatcher and the same result rendering as on the SDK path, and its
result is shaped by the SDK's own result serializer and server-info stamp; what the fast path skips is
the SDK's per-request machinery around them (dispatch context, runner, middleware chain, response
models). A result asking the client for input is sealed by the SDK's own `RequestStateBoundary`.

"Plain" is decided with the SDK's own checks (Content-Type, Accept, the JSON-RPC envelope, duplicated
routing headers, the `_meta` envelope against the headers, the per-version wire surface, the params
model), plus our chain-header check; `tests/test_fastpath.py` sends a generated corpus to servers with
and without the fast path and requires identical answers. Anything else goes to the SDK, which answers it
as always: a cursor, a progress token or log level, `Mcp-Param-*` headers, a later round (request state,
input responses), a task, a tool the caller cannot call, one needing confirmation or bound to headers
(`x-mcp-header`), and a malformed request of any kind.

Its whole contract with the SDK's path (what is plain, what it borrows, where it falls back, how it is proven) is
written in `fastpath_contract`.
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import mcp_types as types
from mcp.server import Server
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.request_state import RequestStateBoundary
from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY, SERVER_INFO_META_KEY
from mcp_types import methods as wire_methods
from pydantic import BaseModel, ValidationError
from starlette.types import Message, Receive, Scope, Send

from mcp_expose.access.policy import listing_key
from mcp_expose.access.protected_resource import request_origin
from mcp_expose.calls.confirmation import StaleConfirmation
from mcp_expose.calls.dispatch import CallRequest, ToolOutcome
from mcp_expose.catalog.compiled import Catalog, ToolEntry
from mcp_expose.catalog.memo import Kept, MemoKind
from mcp_expose.core import telemetry
from mcp_expose.core.asking import ClientInput, MissingClientCapability
from mcp_expose.core.content import ContentBundle
from mcp_expose.core.context import LogSender, no_log
from mcp_expose.core.db import in_worker_thread, tidies_connections
from mcp_expose.core.principal import Principal
from mcp_expose.declare.apps import apps_negotiated
from mcp_expose.serving.fastpath_contract import call_left_to_sdk
from mcp_expose.serving.fastpath_legacy import (
    INITIALIZED,
    answer_as_event_stream,
    constant_key,
    send_accepted,
    send_event,
)
from mcp_expose.serving.fastpath_replies import (
    answer_in_sse_mode,
    encode,
    error_reply,
    reply,
    send_json,
)
from mcp_expose.serving.fastpath_requests import (
    MODERN,
    PlainRequest,
)
from mcp_expose.serving.fastpath_telemetry import server_span
from mcp_expose.serving.request_context import tool_headers
from mcp_expose.serving.server import call_outcome, count_listing
from mcp_expose.serving.wire import internal_error, json_outcome, question_error, render_outcome

logger = logging.getLogger("mcp_expose.fastpath")

# Listing variants kept per catalog revision; past this, the SDK answers (nothing is wrong, just not cached).
MAX_VARIANTS = 1_000
# The encoded `result` of a listing, by what it depends on: the caller's listing key, the version, Apps, variants.
ENCODED_LISTINGS: MemoKind[tuple[Hashable, ...], bytes] = MemoKind("encoded listings", limit=MAX_VARIANTS)
# The encoded `result` of an `initialize` or `ping` (fastpath_legacy.constant_key).
CONSTANT_ANSWERS: MemoKind[tuple[str, ...], bytes] = MemoKind("constant answers", limit=64)
# Tools whose schema depends on who calls.
VARYING_TOOLS: MemoKind[None, tuple[ToolEntry, ...]] = MemoKind("tools varying by caller", limit=1)

Fallback = Callable[[Send], Awaitable[None]]


async def serve(
    plain: PlainRequest,
    principal: Principal,
    catalog: Catalog,
    server: Server[Any],
    exchange: Exchange,
    json_response: bool,
) -> None:
    """Answer a plain request, or hand it to the SDK where something about it needs the SDK after all."""
    if plain.method == "tools/list":
        if await serve_listing(plain, principal, catalog, exchange, json_response):
            await count_listing()  # the SDK's handler did not run, so it did not count this one
    elif plain.method == "tools/call":
        await serve_call(plain, principal, catalog, server, exchange, json_response)
    elif plain.method == INITIALIZED:
        await send_accepted(exchange.send)
    else:
        await serve_remembered(plain, catalog.kept(CONSTANT_ANSWERS), constant_key(plain), exchange, json_response)


async def serve_listing(
    plain: PlainRequest, principal: Principal, catalog: Catalog, exchange: Exchange, json_response: bool
) -> bool:
    """Send the encoded listing and say True; or let the SDK answer (and count it, as it counts every
    listing it serves), keep its answer for next time, and say False."""
    # A client that negotiated MCP Apps is sent the tools' `_meta.ui` (and the tools only apps may call).
    # (Without pages in the catalog the listing is the same either way: nothing to read then.)
    apps = (
        plain.modern
        and bool(catalog.app_pages())
        and apps_negotiated(_declared_capabilities(plain.params.get("_meta") or {}))
    )
    key = ("tools/list", *listing_key(principal, catalog), plain.version, apps)
    varying = catalog.remember(
        VARYING_TOOLS, None, lambda: tuple(entry for entry in catalog.tools if entry.varies_by_caller)
    )
    if varying:
        # Tools whose schema depends on who calls: which schema each is, for this caller, is part of the key.
        key = (*key, await _variants(varying, principal))
    return await serve_remembered(plain, catalog.kept(ENCODED_LISTINGS), key, exchange, json_response)


async def serve_remembered(
    plain: PlainRequest, kept: Kept[Any, bytes], key: Hashable, exchange: Exchange, json_response: bool
) -> bool:
    """Send the result kept under `key` and say True; or let the SDK answer, keep its result, and say False."""
    encoded = kept.get(key)
    if encoded is None:
        await exchange.fallback(exchange.send if kept.full else _capturing(exchange.send, kept, key))
        return False
    with server_span(plain, None, exchange.scope):
        await send_reply(plain, (200, reply(plain.id_json, b"result", encoded)), exchange.send, json_response)
    return True


async def send_reply(plain: PlainRequest, answer: tuple[int, bytes], send: Send, json_response: bool) -> None:
    """A whole answer: JSON, or in SSE mode on 2025-11-25 the one-message event stream its SDK path writes
    (on 2026-07-28 the SDK answers a quick request in JSON in either mode)."""
    if plain.modern or json_response:
        await send_json(answer, send)
    else:
        await send_event(answer[1], send)


@in_worker_thread
@tidies_connections
def _variants(entries: tuple[ToolEntry, ...], principal: Principal) -> tuple[str, ...]:
    return tuple(entry.capability.signature.for_caller(principal).variant for entry in entries)


def _capturing(send: Send, kept: Kept[Any, bytes], key: Hashable) -> Send:
    """Pass the SDK's response through, and keep its `result` when it is a plain success: a JSON body, or an
    event stream of that one message (bounded: a stream longer than a listing can be is not kept)."""
    status = 0
    kind = b""
    chunks: list[bytes] = []
    size = 0

    async def capture(message: Message) -> None:
        nonlocal status, kind, size
        if message["type"] == "http.response.start":
            status = message["status"]
            kind = next((value for name, value in message.get("headers", []) if name.lower() == b"content-type"), b"")
        elif message["type"] == "http.response.body" and status == 200 and kind in CAPTURED_KINDS:
            chunk = message.get("body", b"")
            size += len(chunk)
            if size <= MAX_CAPTURED_BYTES:
                chunks.append(chunk)
            if not message.get("more_body", False) and size <= MAX_CAPTURED_BYTES:
                body = b"".join(chunks)
                _keep(kept, key, body if kind == b"application/json" else _only_event(body))
        await send(message)

    return capture


CAPTURED_KINDS = (b"application/json", b"text/event-stream")
MAX_CAPTURED_BYTES = 16 * 1024 * 1024


def _only_event(stream: bytes) -> bytes:
    """The data of a stream's one event, as the SDK writes it; empty when the stream is anything else."""
    events = [event for event in stream.split(b"\r\n\r\n") if event]
    if len(events) != 1 or not events[0].startswith(b"event: message\r\ndata: "):
        return b""
    return events[0].removeprefix(b"event: message\r\ndata: ")


def _keep(kept: Kept[Any, bytes], key: Hashable, body: bytes) -> None:
    try:
        answer = json.loads(body)
    except ValueError:
        return
    if isinstance(answer, dict) and isinstance(answer.get("result"), dict) and "error" not in answer:
        kept.keep(key, json.dumps(answer["result"], separators=(",", ":")).encode())


@dataclass(frozen=True, slots=True)
class Exchange:
    """One HTTP exchange at the edge: the ASGI triple, the SDK's app for what the fast path does not
    answer, and the SDK's view of the caller, made only when something needs it."""

    scope: Scope
    receive: Receive
    send: Send
    fallback: Fallback
    caller: Callable[[], Any]


async def serve_call(
    plain: PlainRequest,
    principal: Principal,
    catalog: Catalog,
    server: Server[Any],
    exchange: Exchange,
    json_response: bool,
) -> bool:
    """Run the call and send its answer, saying True; or let the SDK answer it (False)."""
    name = plain.params["name"]
    deciding = telemetry.now() if telemetry.timed(exchange.scope) else 0
    entry, reason = call_left_to_sdk(name, catalog, principal, server)
    if reason is not None or entry is None:
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("tools/call %s goes to the SDK: %s", name, reason.value if reason else "")
        await exchange.fallback(exchange.send)
        return False
    if logger.isEnabledFor(logging.DEBUG):  # before the answer leaves, so whoever reads it can see this line
        logger.debug("Answering tools/call %s on the fast path", name)
    laps = (telemetry.Lap("mcp_expose.policy", deciding, telemetry.now(), {}),) if deciding else ()
    answer = partial(
        _under_span, plain, exchange.scope, laps, partial(_answer, plain, principal, catalog, server, exchange, entry)
    )  # the policy decided: the dispatcher does not decide again
    if json_response:
        await send_json(await answer(no_log), exchange.send)
    elif plain.modern:
        await answer_in_sse_mode(answer(no_log), exchange.receive, exchange.send)
    else:  # a 2025-11-25 call's log messages ride its stream, at every level (a stateless session sets none)
        await answer_as_event_stream(answer, exchange.receive, exchange.send)
    return True


async def _under_span(
    plain: PlainRequest,
    scope: Scope,
    laps: tuple[telemetry.Lap, ...],
    answer: Callable[[LogSender], Awaitable[tuple[int, bytes, str | None]]],
    send_log: LogSender,
) -> tuple[int, bytes]:
    """The call's answer (HTTP status and JSON-RPC response), under the call's server span."""
    with server_span(plain, plain.params["name"], scope, laps) as traced:
        status, body, error_type = await answer(send_log)
        if error_type is not None:
            traced.failed(error_type)
        return status, body


async def _answer(
    plain: PlainRequest,
    principal: Principal,
    catalog: Catalog,
    server: Server[Any],
    exchange: Exchange,
    allowed: ToolEntry,
    send_log: LogSender,
) -> tuple[int, bytes, str | None]:
    """The HTTP status and JSON-RPC response for the call (its result, or the error the SDK path would give),
    and its error type as the SDK's span records it (None: a result that is no error)."""
    params = plain.params
    scope = exchange.scope
    meta = params.get("_meta") or {}
    headers = tool_headers((name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"])
    client = scope.get("client")
    request = CallRequest(
        protocol_version=plain.version,
        headers=headers,
        chain=plain.chain,
        # On 2026-07-28 the client declares what it can answer in each request; a stateless 2025-11-25
        # connection knows no capabilities, and has no way back for a question.
        client=(
            ClientInput.for_round(_declared_capabilities(meta), None, None, rounds=True)
            if plain.modern
            else ClientInput.for_round(None, None, None, rounds=False)
        ),
        send_log=send_log,
        base_url=request_origin(scope.get("scheme", "http"), headers),
        client_address=client[0] if client else None,
        allowed=allowed,
    )
    token = auth_context_var.set(exchange.caller())  # as AuthContextMiddleware does: the SDK's get_access_token()
    try:
        outcome = await call_outcome(catalog, principal, params["name"], params.get("arguments"), request)
        wire = _plain_result(outcome, server, plain.modern)
        result = render_outcome(outcome) if wire is None else None
    except (MissingClientCapability, StaleConfirmation) as exc:
        return _error(plain, question_error(exc))
    except (MCPError, ValidationError) as exc:
        return _error(plain, exc)  # as the SDK maps them (`hide_internal_errors` lets both pass)
    except Exception:  # noqa: BLE001  (as `hide_internal_errors` answers it on the SDK path)
        return _error(plain, internal_error("tools/call"))
    finally:
        auth_context_var.reset(token)
    try:
        shaped = wire if result is None else _shaped(result, server, plain.version)
    except ValidationError:
        logger.exception("handler for 'tools/call' returned an invalid result")
        return _error(plain, MCPError(code=types.INTERNAL_ERROR, message="Handler returned an invalid result"))
    assert shaped is not None  # a plain result, or the rendered one
    if plain.modern and shaped.get("resultType") == "input_required":
        token = auth_context_var.set(exchange.caller())  # the caller the sealed state is bound to
        try:
            sealed = await _boundary(server)(
                _SealedRequest("tools/call", params),  # type: ignore[arg-type]  # reads .method, .params only
                _returning(shaped),
            )
            shaped = cast("dict[str, Any]", sealed)  # what call_next returned, with the state sealed in
        except MCPError as exc:
            return _error(plain, exc)
        finally:
            auth_context_var.reset(token)
    return 200, reply(plain.id_json, b"result", encode(shaped)), "tool_error" if shaped.get("isError") is True else None


def _error(plain: PlainRequest, exc: MCPError | ValidationError) -> tuple[int, bytes, str]:
    """The error reply, and its code as the span's error type."""
    status, body = error_reply(plain, exc)
    return status, body, str(exc.error.code if isinstance(exc, MCPError) else types.INVALID_PARAMS)


def _declared_capabilities(meta: Mapping[str, Any]) -> types.ClientCapabilities | None:
    """The client's capabilities from the envelope, typed as the SDK's `Connection.from_envelope` types them
    (a mis-shaped value counts as none declared), without building a whole connection."""
    try:
        return types.ClientCapabilities.model_validate(meta.get(CLIENT_CAPABILITIES_META_KEY), by_name=False)
    except ValidationError:
        return None


def _plain_result(outcome: ToolOutcome, server: Server[Any], modern: bool) -> dict[str, Any] | None:
    """A JSON value's or a tool error's result on the wire, as `_shaped(render_outcome(...))` makes it, without
    building the SDK's models and validating them again (the per-request result validation the fast path may
    skip); None for content blocks and questions, which take that way. 2025-11-25 results have no result type
    and no server stamp."""
    if outcome.input_required is not None or isinstance(outcome.value, ContentBundle):
        return None
    content, text, is_error = json_outcome(outcome)
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": text}],
        "structuredContent": content,
        "isError": is_error,
    }
    if modern:
        result["resultType"] = "complete"
        result["_meta"] = {SERVER_INFO_META_KEY: _server_info(server)}
    return result


def _server_info(server: Server[Any]) -> dict[str, Any]:
    """The SDK's server info stamp, copied once per server: `_plain_result` only encodes it, never changes it
    (the SDK hands out a deep copy on every access so that a caller that does cannot corrupt later ones)."""
    stamp = _SERVER_INFO.get(server)
    if stamp is None:
        stamp = _SERVER_INFO[server] = server.server_info_stamp
    return stamp


_SERVER_INFO: weakref.WeakKeyDictionary[Server[Any], dict[str, Any]] = weakref.WeakKeyDictionary()


def _shaped(result: BaseModel, server: Server[Any], version: str) -> dict[str, Any]:
    """The result on the wire, shaped as the SDK's runner shapes it: its serializer, then (on 2026-07-28) the
    result type and the stamp."""
    wire = wire_methods.serialize_server_result(
        "tools/call", version, result.model_dump(by_alias=True, mode="json", exclude_none=True)
    )
    if version != MODERN:
        return wire
    if wire.get("resultType") is None:
        wire["resultType"] = "complete"
    meta = wire.get("_meta")
    if meta is None:
        wire["_meta"] = {SERVER_INFO_META_KEY: server.server_info_stamp}
    elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
        wire["_meta"] = {**meta, SERVER_INFO_META_KEY: server.server_info_stamp}
    return wire


@dataclass(frozen=True, slots=True)
class _SealedRequest:
    """What the SDK's `RequestStateBoundary` reads of a request context when it seals a result."""

    method: str
    params: Mapping[str, Any]


def _returning(wire: dict[str, Any]) -> Callable[[Any], Awaitable[dict[str, Any]]]:
    async def call_next(ctx: Any) -> dict[str, Any]:
        return wire

    return call_next


def _boundary(server: Server[Any]) -> RequestStateBoundary:
    return next(middleware for middleware in server.middleware if isinstance(middleware, RequestStateBoundary))
