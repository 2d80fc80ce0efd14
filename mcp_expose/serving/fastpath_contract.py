"""The fast path's contract with the SDK's path, in one place: which exchanges count as plain, what the fast path
borrows from the SDK, how it hands a request back, and how the two are kept alike.

DESIGN promises no hand-written JSON-RPC, SSE or sessions except the measured fast paths. This one answers the
exchanges that dominate traffic, with less of the SDK's per-request machinery, and must answer each exactly as the
SDK would; everything below is what keeps it so.

**Plain exchanges** (`PLAIN_METHODS`), decided before anything runs:
- 2026-07-28: a POST of `tools/list` or `tools/call`, checked by `fastpath_requests.plain_request` with the SDK's
  own checks (Content-Type and Accept, the JSON-RPC envelope, duplicated routing headers, the `_meta` envelope
  against the headers, the per-version wire surface, the params model), then our agent-chain check. A cursor, a
  later round, a task, a progress token or a log level is not plain (`UNCACHED_META_KEYS`, `LATER_ROUNDS`
  there). A trace context is: the fast path makes the request's span as the SDK would (`fastpath_telemetry`).
- stateless 2025-11-25 (not with `LEGACY_SESSIONS`): the same two, and `initialize`, `ping` and
  `notifications/initialized`, checked by `fastpath_legacy.plain_legacy_request`.

**What it borrows** from the SDK beyond its published API: `sdk_internals.FAST_PATH_WANTS` (the event streams'
headers and ping interval, the 2026-07-28 error mapping, the Accept check), checked at startup; without one,
`usable()` is False and the SDK answers everything. It uses the SDK's public pieces as the SDK does: the result
serializer and server-info stamp, `RequestStateBoundary`, `auth_context_var`, the inbound request checks.

**How it falls back**, at three points, each handing the untouched request to the SDK (`Exchange.fallback`, which
is `path_choice.through_sdk`):
- a listing or constant answer not yet encoded for this revision and caller: the SDK answers, and its answer is
  captured for next time (`fastpath.serve_remembered`);
- a call the SDK must answer (`SdkAnswers`, decided by `call_left_to_sdk`);
- a request that is not plain: the gate's caller never reaches the fast path (`path_choice.answer`).

**How it is proven:** `tests/test_fastpath.py` sends a generated corpus of requests, hostile ones included, to
servers with and without the fast path, in both eras and both response modes, and requires identical answers;
`tests/test_policy_once.py` shows it decides the policy once; `bench/` measures what it saves.
"""

from __future__ import annotations

import enum
import json
from typing import TYPE_CHECKING, Any

from mcp_expose.access.policy import decide
from mcp_expose.catalog.compiled import Catalog, ToolEntry
from mcp_expose.catalog.memo import MemoKind
from mcp_expose.core.principal import Principal
from mcp_expose.declare.json_schemas import thaw

if TYPE_CHECKING:
    from mcp.server import Server

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
PLAIN_METHODS: dict[str, frozenset[str]] = {
    MODERN: frozenset({"tools/list", "tools/call"}),
    LEGACY: frozenset({"tools/list", "tools/call", "initialize", "ping", "notifications/initialized"}),
}
HEADER_ANNOTATION = "x-mcp-header"
# Tools with `x-mcp-header` parameters.
HEADER_BOUND: MemoKind[None, frozenset[str]] = MemoKind("header-bound tools", limit=1)


class SdkAnswers(enum.Enum):
    """Why a plain `tools/call` is still the SDK's to answer."""

    UNKNOWN = "no tool of that name is served here"
    CONFIRMATION = "the tool needs a confirmation round"
    TASK = "the tool may run as an MCP task"
    HEADER_BOUND = "the SDK checks the tool's Mcp-Param headers against its arguments"
    CACHE_HINTS = "the server sets cache hints on calls"
    FORBIDDEN = "the caller may not use the tool (the SDK answers as for an unknown one)"


def call_left_to_sdk(
    name: str, catalog: Catalog, principal: Principal, server: Server[Any]
) -> tuple[ToolEntry | None, SdkAnswers | None]:
    """The entry of `name` and None when the fast path may answer the call (the policy allowed it: the
    dispatcher does not decide again); else why the SDK answers it."""
    entry = catalog.get(name)
    if entry is None:
        return None, SdkAnswers.UNKNOWN
    if entry.requires_confirmation:
        return entry, SdkAnswers.CONFIRMATION
    if entry.task_support is not None:
        return entry, SdkAnswers.TASK
    if name in header_bound(catalog):
        return entry, SdkAnswers.HEADER_BOUND
    if server.cache_hints.get("tools/call") is not None:
        return entry, SdkAnswers.CACHE_HINTS
    if not decide(principal, entry).allowed:
        return entry, SdkAnswers.FORBIDDEN
    return entry, None


def header_bound(catalog: Catalog) -> frozenset[str]:
    """Tools with `x-mcp-header` parameters: the SDK checks their headers against the arguments."""
    return catalog.remember(
        HEADER_BOUND,
        None,
        lambda: frozenset(
            entry.name for entry in catalog.tools if HEADER_ANNOTATION in json.dumps(thaw(entry.input_schema))
        ),
    )
