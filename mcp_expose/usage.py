"""The usage log: one row per tools/call. Writing it never fails the call, and never loses it silently."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from .db import close_stale_connections
from .outage import database_unavailable

logger = logging.getLogger("mcp_expose.usage")

SECRET_KEY_PATTERN = re.compile(r"pass|secret|token|key|auth|credential|cookie|session", re.IGNORECASE)
REDACTED = "[redacted]"
WRITE_ATTEMPTS = 3


@dataclass
class CallRecord:
    tool_name: str
    principal: Any
    outcome: str = "internal"
    tool_key: str = ""
    error_code: str = ""
    incident: str = ""
    duration_ms: float = 0.0
    argument_bytes: int = 0
    result_bytes: int = 0
    argument_keys: list[str] = field(default_factory=list)
    argument_values: dict[str, Any] | None = None
    depth: int = 0
    conversation_id: str = ""
    protocol_version: str = ""
    # When the call started: the row keeps it even when written later, in a batch.
    created_at: Any = field(default_factory=timezone.now)


def describe_arguments(arguments: Mapping[str, Any] | None, with_values: bool) -> tuple[int, list[str], dict[str, Any] | None]:
    """Size, keys and (when allowed) values of the arguments, secrets redacted."""
    arguments = arguments or {}
    try:
        size = len(json.dumps(arguments, default=str))
    except (TypeError, ValueError):
        size = 0
    keys = sorted(str(key) for key in arguments)
    values = None
    if with_values:
        values = json.loads(json.dumps(redact(dict(arguments)), default=str))
    return size, keys, values


def redact(value: Any) -> Any:
    """`value` with every secret-looking key's value replaced, at any depth."""
    if isinstance(value, Mapping):
        return {str(key): REDACTED if SECRET_KEY_PATTERN.search(str(key)) else redact(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value


def row_for(record: CallRecord) -> Any:
    """The `ToolCall` row for a record (unsaved)."""
    from .models import ToolCall

    return ToolCall(**row_values(record))


def row_values(record: CallRecord) -> dict[str, Any]:
    """The record's `ToolCall` column values by attribute name: what an insert needs, without building a
    model instance (most of the cost of a batched row)."""
    principal = record.principal
    user = principal.user if getattr(principal.user, "is_authenticated", False) else None
    return {
        "created_at": record.created_at,
        "tool_name": record.tool_name[:64],
        "tool_key": record.tool_key,
        "user_id": user.pk if user is not None else None,
        "username": user.get_username() if user is not None else "",
        "auth_method": principal.method,
        "client_id": principal.client_id or "",
        "api_key_prefix": principal.api_key_prefix or "",
        "scopes": " ".join(sorted(principal.scopes))[:1000],
        "outcome": record.outcome,
        "error_code": record.error_code,
        "incident": record.incident,
        "duration_ms": record.duration_ms,
        "argument_bytes": record.argument_bytes,
        "result_bytes": record.result_bytes,
        "argument_keys": record.argument_keys,
        "argument_values": record.argument_values,
        "depth": record.depth,
        "conversation_id": record.conversation_id or "",
        "protocol_version": record.protocol_version or "",
    }


def write(record: CallRecord, attempts: int = WRITE_ATTEMPTS) -> bool:
    """Insert the row, retrying briefly; on final failure log it whole (without secrets). Sync."""
    principal = record.principal
    try:
        row = row_for(record)
    except Exception:  # noqa: BLE001  (the log must never break the call)
        logger.exception("Could not build the usage row for %s (outcome %s, caller %s)",
                         record.tool_name, record.outcome, principal.label)
        return False
    for attempt in range(1, attempts + 1):
        close_stale_connections()
        try:
            row.save(force_insert=True)
            return True
        except Exception as exc:  # noqa: BLE001  (the log must never break the call)
            if attempt == attempts:
                # An outage is logged once as such (mcp_expose.outage): no traceback per row for it.
                unavailable = database_unavailable(exc)
                logger.error(
                    "Could not write the usage row for %s (outcome %s, caller %s, %.1f ms) after %d attempts%s",
                    record.tool_name, record.outcome, principal.label, record.duration_ms, attempt,
                    ": the database is unavailable" if unavailable else "", exc_info=not unavailable,
                )
                return False
            time.sleep(0.05 * attempt)
        finally:
            close_stale_connections()
    return False
