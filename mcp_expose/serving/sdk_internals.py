"""The SDK pieces the fast path borrows from outside the SDK's public API, looked up and checked at startup.

The fast path answers plain 2026-07-28 requests exactly as the SDK would, with a few of the SDK's own pieces that
it does not publish: constants of a private module, helpers outside any `__all__`. A later SDK may move, rename or
reshape them without notice. `borrowed()` looks each one up and checks its shape once; when one is missing or
changed, the server logs one warning naming it and serves every request through the SDK, which needs none of them.
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


@dataclass(frozen=True, slots=True)
class Borrowed:
    """What the fast path uses of the SDK's unpublished pieces."""

    sse_headers: list[tuple[bytes, bytes]]  # the response headers of the SDK's event streams
    sse_ping_interval: float  # seconds between the SDK's keep-alive pings
    modern_error_data: Callable[[Exception], Any]  # an exception as the SDK writes it in a 2026-07-28 error
    check_accept_headers: Callable[[Any], tuple[bool, bool]]  # (accepts JSON, accepts SSE) for a request


@dataclass(frozen=True, slots=True)
class Wanted:
    """One borrowed piece: where it lives, and the shape it must have."""

    module: str
    name: str
    fits: Callable[[Any], bool]
    shape: str


def _header_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(part, bytes) for part in pair) for pair in value
    )


def _seconds(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _function_of(*names: str) -> Callable[[Any], bool]:
    def fits(value: Any) -> bool:
        if not callable(value):
            return False
        try:
            parameters = list(inspect.signature(value).parameters.values())
        except (TypeError, ValueError):
            return False
        required = [p.name for p in parameters if p.default is p.empty and p.kind is not p.VAR_KEYWORD]
        return [p.name for p in parameters[: len(names)]] == list(names) and len(required) <= len(names)

    return fits


MODERN_HTTP = "mcp.server._streamable_http_modern"
WANTED: dict[str, Wanted] = {
    "sse_headers": Wanted(MODERN_HTTP, "_SSE_HEADERS", _header_list, "a list of (bytes, bytes) header pairs"),
    "sse_ping_interval": Wanted(MODERN_HTTP, "_SSE_PING_INTERVAL", _seconds, "a positive number of seconds"),
    "modern_error_data": Wanted("mcp.server.runner", "modern_error_data", _function_of("exc"), "a function of (exc)"),
    "check_accept_headers": Wanted(
        "mcp.server.streamable_http", "check_accept_headers", _function_of("request"), "a function of (request)"
    ),
}
assert set(WANTED) == {field.name for field in fields(Borrowed)}


def probe(wanted: dict[str, Wanted] = WANTED) -> tuple[Borrowed | None, Sequence[str]]:
    """Each wanted piece looked up and checked: all of them, or None and what is missing or changed."""
    found: dict[str, Any] = {}
    problems: list[str] = []
    for key, want in wanted.items():
        where = f"{want.module}.{want.name}"
        try:
            value = getattr(importlib.import_module(want.module), want.name)
        except ImportError:
            problems.append(f"{where} (its module cannot be imported)")
            continue
        except AttributeError:
            problems.append(f"{where} (missing)")
            continue
        if not want.fits(value):
            problems.append(f"{where} (no longer {want.shape})")
            continue
        found[key] = value
    return (None, problems) if problems else (Borrowed(**found), ())


@functools.cache
def borrowed() -> Borrowed | None:
    """The borrowed pieces, or None (logged once, naming each problem) when this SDK lacks one."""
    pieces, problems = probe()
    if pieces is None:
        logger.warning(
            "FAST_PATH is off: the installed SDK (mcp %s) lacks what the fast path borrows from it: %s. Every "
            "request is served through the SDK.",
            _sdk_version(),
            "; ".join(problems),
        )
    return pieces


def _sdk_version() -> str:
    try:
        return version("mcp")
    except PackageNotFoundError:
        return "unknown"
