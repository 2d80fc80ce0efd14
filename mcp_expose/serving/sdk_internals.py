"""Every SDK name we use that the SDK does not publish, looked up and checked at startup.

Two features lean on unpublished pieces of the SDK:
- the fast path answers plain 2026-07-28 requests exactly as the SDK would, with constants of a private module and
  helpers outside any `__all__`;
- stateful 2025-11-25 sessions (`LEGACY_SESSIONS`) override three private methods of the SDK's session manager, to
  cap sessions per caller and to forget a session's memory when it ends.

A later SDK may move, rename or reshape any of them without notice. Each feature's pieces are probed once; when one
is missing or changed, the server logs one warning naming it, and serves through the SDK's public path instead: every
request through the SDK for the fast path, stateless 2025-11-25 serving for sessions. `tests/test_sdk_internals.py`
reads the package's source and fails on a private SDK name used anywhere that is not listed here.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from importlib.metadata import PackageNotFoundError, version
from typing import Any

logger = logging.getLogger("mcp_expose.fastpath")
sessions_logger = logging.getLogger("mcp_expose.sessions")


@dataclass(frozen=True, slots=True)
class Borrowed:
    """What the fast path uses of the SDK's unpublished pieces."""

    sse_headers: list[tuple[bytes, bytes]]  # the response headers of the SDK's event streams
    sse_ping_interval: float  # seconds between the SDK's keep-alive pings
    modern_error_data: Callable[[Exception], Any]  # an exception as the SDK writes it in a 2026-07-28 error
    check_accept_headers: Callable[[Any], tuple[bool, bool]]  # (accepts JSON, accepts SSE) for a request


@dataclass(frozen=True, slots=True)
class Wanted:
    """One unpublished piece: where it lives (`name` may be `Class.attribute`), and the shape it must have."""

    module: str
    name: str
    fits: Callable[[Any], bool]
    shape: str

    @property
    def where(self) -> str:
        return f"{self.module}.{self.name}"


def _header_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(part, bytes) for part in pair) for pair in value
    )


def _seconds(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _function_of(*names: str, coroutine: bool = False) -> Callable[[Any], bool]:
    """A callable whose leading parameters are `names`, needing no others (a coroutine function if asked)."""

    def fits(value: Any) -> bool:
        if not callable(value) or (coroutine and not inspect.iscoroutinefunction(value)):
            return False
        try:
            parameters = list(inspect.signature(value).parameters.values())
        except (TypeError, ValueError):
            return False
        required = [p.name for p in parameters if p.default is p.empty and p.kind is not p.VAR_KEYWORD]
        return [p.name for p in parameters[: len(names)]] == list(names) and len(required) <= len(names)

    return fits


MODERN_HTTP = "mcp.server._streamable_http_modern"
FAST_PATH_WANTS: dict[str, Wanted] = {
    "sse_headers": Wanted(MODERN_HTTP, "_SSE_HEADERS", _header_list, "a list of (bytes, bytes) header pairs"),
    "sse_ping_interval": Wanted(MODERN_HTTP, "_SSE_PING_INTERVAL", _seconds, "a positive number of seconds"),
    "modern_error_data": Wanted("mcp.server.runner", "modern_error_data", _function_of("exc"), "a function of (exc)"),
    "check_accept_headers": Wanted(
        "mcp.server.streamable_http", "check_accept_headers", _function_of("request"), "a function of (request)"
    ),
}
assert set(FAST_PATH_WANTS) == {field.name for field in fields(Borrowed)}

MANAGER = "mcp.server.streamable_http_manager"
SESSION_WANTS: dict[str, Wanted] = {
    "handle_stateful_request": Wanted(
        MANAGER,
        "StreamableHTTPSessionManager._handle_stateful_request",
        _function_of("self", "scope", "receive", "send", coroutine=True),
        "a coroutine function of (self, scope, receive, send)",
    ),
    "admit_session": Wanted(
        MANAGER,
        "StreamableHTTPSessionManager._admit_session",
        _function_of("self", "requestor"),
        "a function of (self, requestor)",
    ),
    "discard_session": Wanted(
        MANAGER,
        "StreamableHTTPSessionManager._discard_session",
        _function_of("self", "session_id", "transport", coroutine=True),
        "a coroutine function of (self, session_id, transport)",
    ),
}

# Every unpublished SDK name the package uses, by the feature that falls back without it.
EVERY_WANT: dict[str, dict[str, Wanted]] = {"FAST_PATH": FAST_PATH_WANTS, "LEGACY_SESSIONS": SESSION_WANTS}


def _look_up(want: Wanted) -> Any:
    value: Any = importlib.import_module(want.module)
    for part in want.name.split("."):
        value = getattr(value, part)
    return value


def probe(wanted: dict[str, Wanted] = FAST_PATH_WANTS) -> tuple[dict[str, Any] | None, Sequence[str]]:
    """Each wanted piece looked up and checked: all of them by key, or None and what is missing or changed."""
    found: dict[str, Any] = {}
    problems: list[str] = []
    for key, want in wanted.items():
        try:
            value = _look_up(want)
        except ImportError:
            problems.append(f"{want.where} (its module cannot be imported)")
            continue
        except AttributeError:
            problems.append(f"{want.where} (missing)")
            continue
        if not want.fits(value):
            problems.append(f"{want.where} (no longer {want.shape})")
            continue
        found[key] = value
    return (None, problems) if problems else (found, ())


def _probed(wanted: dict[str, Wanted], log: logging.Logger, turned_off: str) -> dict[str, Any] | None:
    """The pieces `probe` finds, or None after one warning: what is turned off, and each piece lacking."""
    found, problems = probe(wanted)
    if found is None:
        log.warning(turned_off, sdk_version(), "; ".join(problems))
    return found


@functools.cache
def borrowed() -> Borrowed | None:
    """The fast path's borrowed pieces, or None (logged once, naming each problem) when this SDK lacks one."""
    found = _probed(
        FAST_PATH_WANTS,
        logger,
        "FAST_PATH is off: the installed SDK (mcp %s) lacks what the fast path borrows from it: %s. Every request is "
        "served through the SDK.",
    )
    return None if found is None else Borrowed(**found)


@functools.cache
def sessions_can_be_stateful() -> bool:
    """Whether the SDK's session manager still has what stateful sessions override (logged once if not)."""
    found = _probed(
        SESSION_WANTS,
        sessions_logger,
        "LEGACY_SESSIONS is off: the installed SDK (mcp %s) lacks what stateful sessions override in it: %s. "
        "2025-11-25 clients are served statelessly.",
    )
    return found is not None


def missing_pieces() -> dict[str, Sequence[str]]:
    """What this SDK lacks, by the setting of the feature that falls back (empty when it lacks nothing)."""
    missing: dict[str, Sequence[str]] = {}
    for setting, wanted in EVERY_WANT.items():
        _found, problems = probe(wanted)
        if problems:
            missing[setting] = problems
    return missing


def sdk_version() -> str:
    try:
        return version("mcp")
    except PackageNotFoundError:
        return "unknown"
