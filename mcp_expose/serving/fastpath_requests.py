"""Which 2026-07-28 requests are plain enough for the fast path, decided with the SDK's own checks.

Content-Type and Accept, the JSON-RPC envelope, duplicated routing headers, the `_meta` envelope against the
headers, the per-version wire surface and the params model, then our agent-chain check. Whatever any of them
refuses, or anything asking for more than one plain round, is left to the SDK. (`fastpath_legacy` decides the
same for 2025-11-25.) The whole contract with the SDK's path is written in `fastpath_contract`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.inbound import (
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types import JSONRPCRequest
from mcp_types import methods as wire_methods
from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from mcp_expose.core.chain import CallChain, read_chain
from mcp_expose.serving.sdk_internals import Borrowed, borrowed

MODERN = "2026-07-28"


# A progress token or log level asks for notifications. (A trace context is plain: the fast path continues it in
# its own span, `fastpath_telemetry`.)
UNCACHED_META_KEYS = frozenset({"progressToken", "io.modelcontextprotocol/logLevel"})


# Params that make a request something other than a first, plain round: a page, a later round, a task.
LATER_ROUNDS = ("cursor", "request_state", "input_responses", "task")


PARAMS_MODELS: dict[str, type[BaseModel]] = {
    "tools/list": types.PaginatedRequestParams,
    "tools/call": types.CallToolRequestParams,
}


_CONTENT_TYPE_CHECK = TransportSecurityMiddleware(None)


@dataclass(frozen=True, slots=True)
class PlainRequest:
    """A request the fast path may answer: its method, its id as JSON (empty for a notification), its params,
    its agent chain, and the protocol version it is answered in (what the SDK's connection would say)."""

    method: str
    id_json: bytes
    params: Mapping[str, Any]
    chain: CallChain
    version: str = MODERN

    @property
    def modern(self) -> bool:
        return self.version == MODERN


def usable() -> bool:
    """Whether the installed SDK has everything the fast path borrows (checked once, a warning if not)."""
    return borrowed() is not None


def sdk_pieces() -> Borrowed:
    pieces = borrowed()
    assert pieces is not None, "the fast path runs only when usable() says so"
    return pieces


def is_candidate(method: str, headers: Mapping[str, str]) -> bool:
    """Cheap first look, before the body is read: a 2026-07-28 `tools/list` or `tools/call` POST."""
    return (
        method == "POST"
        and headers.get("mcp-method") in PARAMS_MODELS
        and headers.get("mcp-protocol-version") == MODERN
    )


def accepted(request: Request, json_response: bool) -> bool:
    """The SDK's Accept rule: JSON always, and in SSE mode the event stream too."""
    has_json, has_sse = sdk_pieces().check_accept_headers(request)
    return has_json and (json_response or has_sse)


async def plain_request(
    scope: Any, headers: Mapping[str, str], body: bytes, json_response: bool
) -> PlainRequest | None:
    """The request, when it is one the SDK would answer plainly; else None (the SDK answers it)."""
    if any(name.startswith("mcp-param-") for name in headers):
        return None
    request = Request(scope)
    if await _CONTENT_TYPE_CHECK.validate_request(request, is_post=True) is not None:
        return None
    if not accepted(request, json_response):
        return None
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return None
    method = headers.get("mcp-method")
    if (
        not isinstance(decoded, dict)
        or method not in PARAMS_MODELS
        or decoded.get("method") != method
        or "id" not in decoded
    ):
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
        wire_methods.validate_client_request(method, MODERN, params)
        typed = PARAMS_MODELS[method].model_validate({} if params is None else params, by_name=False)
    except Exception:  # noqa: BLE001  (anything the SDK would refuse, however it says so: the SDK answers)
        return None
    meta = (params or {}).get("_meta") or {}
    if UNCACHED_META_KEYS & set(meta) or any(getattr(typed, name, None) is not None for name in LATER_ROUNDS):
        return None
    try:
        chain = read_chain(headers)
    except Exception:  # noqa: BLE001  (InvalidChain, or anything else: the SDK path answers it)
        return None
    return PlainRequest(method, json.dumps(envelope.id).encode(), params or {}, chain)
