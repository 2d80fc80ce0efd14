"""Usage rows that cannot be written: counted, and each logged whole, by whoever lost it (the writer, its spill
files, a call writing its own row). Below both the usage log and its spill files, which report through it."""

from __future__ import annotations

import logging
import threading
from typing import Any

from mcp_expose.core.errors import McpExposeError
from mcp_expose.core.outage import database_unavailable, first_line

logger = logging.getLogger("mcp_expose.usage")


class DatabaseUnavailable(McpExposeError):
    """The database cannot take rows right now (locked, down, unreachable): keep them and try again later."""


_lost_lock = threading.Lock()
_lost = 0


def count_lost(rows: int) -> None:
    global _lost
    with _lost_lock:
        _lost += rows


def rows_lost() -> int:
    """Usage rows this process has lost since it started (each logged whole when it was)."""
    return _lost


def lose(rows: list[dict[str, Any]], exc: BaseException) -> None:
    """Count the rows lost and log each whole: everything a reader needs to know the call happened (its
    arguments as recorded, secrets already redacted), never a secret. A traceback once, for what is a bug."""
    count_lost(len(rows))
    trace = not database_unavailable(exc) and not isinstance(exc, OSError | DatabaseUnavailable)
    for index, row in enumerate(rows):
        logger.error(
            "Lost the usage row for %s (caller %s, outcome %s%s, at %s, conversation %r, %.1f ms, row id %s, "
            "arguments %s: %r): %s: %s",
            row.get("tool_name"),
            caller_label(row),
            row.get("outcome"),
            f", error {row['error_code']}" if row.get("error_code") else "",
            _isoformat(row.get("created_at")),
            row.get("conversation_id") or "",
            row.get("duration_ms") or 0.0,
            row.get("row_id"),
            row.get("argument_keys"),
            row.get("argument_values"),
            type(exc).__name__,
            first_line(exc),
            exc_info=exc if trace and index == 0 else None,
        )


def caller_label(row: dict[str, Any]) -> str:
    """`Principal.label` of the row's caller, from its columns."""
    who, method = row.get("username") or "anonymous", row.get("auth_method")
    if method == "api_key":
        return f"{who} (API key {row.get('api_key_prefix')})"
    if method == "oauth":
        return f"{who} (OAuth client {row.get('client_id')})"
    return f"{who} ({method})" if method else who


def _isoformat(moment: Any) -> str:
    return moment.isoformat() if hasattr(moment, "isoformat") else str(moment)
