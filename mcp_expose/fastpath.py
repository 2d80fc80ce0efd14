"""The one place mcp_expose answers a protocol request itself: a plain 2026-07-28 `tools/list`.

A listing depends only on the catalog revision and on what the caller may see, so the answer is
encoded once per (revision, visibility) and served as bytes afterwards, with the request's id
spliced in. The first answer for each is produced by the SDK itself and captured from the wire, so
what the fast path serves is byte for byte what the SDK would have sent.

"Plain" is decided with the SDK's own checks (Content-Type, Accept, the JSON-RPC envelope, duplicated
routing headers, the `_meta` envelope against the headers, the per-version wire surface, the params
model), plus our chain-header check; `tests/test_fastpath.py` sends a generated corpus to servers with
and without the fast path and requires identical answers. Anything else (a cursor, a progress token or log level, `Mcp-Param-*` headers, a malformed
request of any kind) goes to the SDK, which answers it as always.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request, find_duplicated_routing_header
from mcp_types import JSONRPCRequest
from mcp_types import methods as wire_methods
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Message, Send

from .catalog import Catalog
from .chain import read_chain
from .principal import Principal

MODERN = "2026-07-28"
# Listing variants kept per catalog revision; past this, the SDK answers (nothing is wrong, just not cached).
MAX_VARIANTS = 1_000
UNCACHED_META_KEYS = frozenset({"progressToken", "io.modelcontextprotocol/logLevel"})
_CONTENT_TYPE_CHECK = TransportSecurityMiddleware(None)

Fallback = Callable[[Send], Awaitable[None]]


def is_candidate(method: str, headers: Mapping[str, str]) -> bool:
    """Cheap first look, before the body is read: a 2026-07-28 `tools/list` POST."""
    return method == "POST" and headers.get("mcp-method") == "tools/list" and \
        headers.get("mcp-protocol-version") == MODERN


async def plain_listing_id(scope: Any, headers: Mapping[str, str], body: bytes, json_response: bool) -> bytes | None:
    """The request's id, JSON-encoded, when this is a listing the SDK would answer plainly; else None."""
    if any(name.startswith("mcp-param-") for name in headers):
        return None
    request = Request(scope)
    if await _CONTENT_TYPE_CHECK.validate_request(request, is_post=True) is not None:
        return None
    has_json, has_sse = check_accept_headers(request)
    if not has_json or (not json_response and not has_sse):
        return None
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(decoded, dict) or decoded.get("method") != "tools/list" or "id" not in decoded:
        return None
    try:
        envelope = JSONRPCRequest.model_validate(decoded)
    except ValidationError:
        return None
    if find_duplicated_routing_header(request.headers.items()) is not None:
        return None
    if isinstance(classify_inbound_request(decoded, headers=dict(request.headers)), InboundLadderRejection):
        return None
    params = decoded.get("params")
    try:
        # What the SDK's runner checks before a handler runs: the per-version wire surface, then the params model.
        wire_methods.validate_client_request("tools/list", MODERN, params)
        listing = types.PaginatedRequestParams.model_validate({} if params is None else params, by_name=False)
    except Exception:  # noqa: BLE001  (anything the SDK would refuse, however it says so: the SDK answers)
        return None
    meta = (params or {}).get("_meta") or {}
    if listing.cursor is not None or UNCACHED_META_KEYS & set(meta):
        return None
    try:
        read_chain(headers)
    except Exception:  # noqa: BLE001  (InvalidChain, or anything else: the SDK path answers it)
        return None
    return json.dumps(envelope.id).encode()


def visibility(principal: Principal, catalog: Catalog) -> tuple[Any, ...]:
    """What `policy.decide` reads from the caller, narrowed to what this catalog's tools ask about:
    equal tuples see the same tools, and callers differing only in what no tool asks for share one."""
    scopes, permissions, clients = catalog.remember("visibility-inputs", lambda: (
        frozenset().union(*(entry.scopes for entry in catalog.tools)),
        frozenset().union(*(entry.permissions for entry in catalog.tools)),
        frozenset().union(*(entry.allowed_clients for entry in catalog.tools)),
    ))
    return (
        "tools/list",
        principal.scopes & scopes,
        principal.method == "local",
        principal.client_id if principal.client_id in clients else None,
        principal.permissions & permissions,
        principal.is_superuser,
        bool(getattr(principal.user, "is_active", False)),
    )


async def serve_listing(
    request_id: bytes, principal: Principal, catalog: Catalog, send: Send, fallback: Fallback
) -> bool:
    """Send the encoded listing and say True; or let the SDK answer (and count it, as it counts every
    listing it serves), keep its answer for next time, and say False."""
    key = visibility(principal, catalog)
    encoded = catalog.memo.get(key)
    if encoded is None:
        listings = sum(1 for existing in catalog.memo if isinstance(existing, tuple) and existing[:1] == ("tools/list",))
        await fallback(_capturing(send, catalog, key) if listings < MAX_VARIANTS else send)
        return False
    body = b'{"jsonrpc":"2.0","id":' + request_id + b',"result":' + encoded + b"}"
    await send({
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")],
    })
    await send({"type": "http.response.body", "body": body})
    return True


def _capturing(send: Send, catalog: Catalog, key: tuple[Any, ...]) -> Send:
    """Pass the SDK's response through, and keep its `result` when it is a plain JSON success."""
    status = 0
    json_body = False
    chunks: list[bytes] = []

    async def capture(message: Message) -> None:
        nonlocal status, json_body
        if message["type"] == "http.response.start":
            status = message["status"]
            json_body = any(name.lower() == b"content-type" and value == b"application/json"
                            for name, value in message.get("headers", []))
        elif message["type"] == "http.response.body" and status == 200 and json_body:
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                _keep(catalog, key, b"".join(chunks))
        await send(message)

    return capture


def _keep(catalog: Catalog, key: tuple[Any, ...], body: bytes) -> None:
    try:
        answer = json.loads(body)
    except ValueError:
        return
    if isinstance(answer, dict) and isinstance(answer.get("result"), dict) and "error" not in answer:
        catalog.memo.setdefault(key, json.dumps(answer["result"], separators=(",", ":")).encode())
