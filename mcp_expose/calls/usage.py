"""The usage log: one row per tools/call. Writing it never fails the call, and never loses it silently."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from mcp_expose.calls.usage_losses import DatabaseUnavailable, count_lost, lose, rows_lost  # noqa: F401  (the writer reads them here)
from mcp_expose.core.db import close_stale_connections
from mcp_expose.core.outage import database_unavailable, first_line

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
    # The row's identity from the start: writing it twice (a retry, a replayed spill file) keeps one.
    row_id: uuid.UUID = field(default_factory=uuid.uuid4)


def describe_arguments(
    arguments: Mapping[str, Any] | None, with_values: bool
) -> tuple[int, list[str], dict[str, Any] | None]:
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
        return {
            str(key): REDACTED if SECRET_KEY_PATTERN.search(str(key)) else redact(item) for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value


def row_values(record: CallRecord) -> dict[str, Any]:
    """The record's `ToolCall` column values by attribute name: what an insert needs, without building a
    model instance (most of the cost of a batched row)."""
    principal = record.principal
    user = principal.user if getattr(principal.user, "is_authenticated", False) else None
    return {
        "row_id": record.row_id,
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
    """Insert the row, retrying briefly while the database is unavailable, then spill it to disk for the next
    server start to write; True when written now. A row lost (not JSON, refused for another reason, or the
    disk failing too) is logged whole, without secrets. Sync."""
    rows = rows_of([record])
    for attempt in range(1, attempts + 1):
        try:
            return bool(rows) and write_rows(rows) == 0
        except DatabaseUnavailable:
            if attempt < attempts:
                time.sleep(0.05 * attempt)
    from mcp_expose.calls.usage_spill import set_aside  # above this module: it logs what it loses through `lose`

    set_aside(rows)
    return False


def rows_of(records: list[CallRecord]) -> list[dict[str, Any]]:
    """The records' `row_values`; a record whose row cannot even be built is lost, logged whole."""
    rows = []
    for record in records:
        try:
            rows.append(row_values(record))
        except Exception as exc:  # noqa: BLE001  (the log must never break the call)
            lose([loggable(record)], exc)
    return rows


def write_rows(rows: list[dict[str, Any]]) -> int:
    """Insert `row_values` rows together, or each on its own if they fail together, so one bad row costs no
    other; return how many were lost (refused for a reason other than an outage, and logged whole).
    Raises `DatabaseUnavailable` at the first sign of an outage: then the rows are the caller's to keep."""
    try:
        _insert(rows)
        return 0
    except DatabaseUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001  (the log must never stop; each row gets its own chance)
        if len(rows) == 1:
            lose(rows, exc)
            return 1
        logger.warning("Could not write %d usage rows together; writing them one by one", len(rows), exc_info=True)
    lost = 0
    for row in rows:
        try:
            _insert([row])
        except DatabaseUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001  (a row refused alone is a bug or bad data: not retried)
            lose([row], exc)
            lost += 1
    return lost


def _insert(rows: list[dict[str, Any]]) -> None:
    """`insert_rows`, with an outage (any failure to connect, or `database_unavailable`) told apart."""
    from django.db import InterfaceError, OperationalError, connections, router

    from mcp_expose.models import ToolCall

    close_stale_connections()
    try:
        try:
            connections[router.db_for_write(ToolCall)].ensure_connection()
        except (OperationalError, InterfaceError) as exc:
            raise DatabaseUnavailable(first_line(exc)) from exc
        try:
            insert_rows(rows)
        except Exception as exc:
            if database_unavailable(exc):
                raise DatabaseUnavailable(first_line(exc)) from exc
            raise
    finally:
        close_stale_connections()


def insert_rows(rows: list[dict[str, Any]]) -> None:
    """One `executemany` of the INSERT Django compiles for one row, in one transaction: what `bulk_create`
    does, without compiling the statement again, or building a model instance, for every row (the bulk of
    its cost for small rows). A row whose row id is already in the table is skipped (`ON CONFLICT (row_id) DO
    NOTHING`): writing a batch again after a commit whose answer was lost adds nothing. `rows` are
    `row_values`, prepared by `prepared_values` as a save would prepare them (`ToolCall` has no field that
    sets itself on save)."""
    from django.db import connections, router, transaction

    from mcp_expose.models import ToolCall

    alias = router.db_for_write(ToolCall)
    connection = connections[alias]
    fields, sql = insert_statement(connection)
    values = prepared_values(rows, fields, connection)
    with transaction.atomic(using=alias, savepoint=False), connection.cursor() as cursor:
        cursor.executemany(sql, values)


def insert_statement(connection: Any) -> tuple[list[Any], str]:
    """The fields and the SQL of a one-row `ToolCall` INSERT that skips a row id already written.

    Where the backend has `ON CONFLICT (column)` (PostgreSQL, SQLite), the conflict named is the row id's
    alone: SQLite's `INSERT OR IGNORE`, which Django's `OnConflict.IGNORE` compiles to, would also skip a row
    breaking a NOT NULL or CHECK constraint without a word, instead of it being logged as lost. Elsewhere,
    Django's `OnConflict.IGNORE`."""
    from django.db.models.constants import OnConflict
    from django.db.models.sql import InsertQuery

    from mcp_expose.models import ToolCall

    fields = [field for field in ToolCall._meta.concrete_fields if field is not ToolCall._meta.auto_field]
    targeted = connection.features.supports_update_conflicts_with_target
    query = InsertQuery(ToolCall, on_conflict=None if targeted else OnConflict.IGNORE)
    query.insert_values(fields, [ToolCall()])
    [(sql, _)] = query.get_compiler(connection=connection).as_sql()
    if targeted:
        sql += f" ON CONFLICT ({connection.ops.quote_name(ToolCall._meta.get_field('row_id').column)}) DO NOTHING"
    return fields, sql


def prepared_values(rows: list[dict[str, Any]], fields: list[Any], connection: Any) -> list[list[Any]]:
    """Each row's parameters, in `fields` order: what each field's `get_db_prep_save` returns, without calling
    it for a string in a text column or a float in a float column (it returns them as they are on every
    backend Django ships; not integers: psycopg 3 wraps those in its Int2/Int4 types)."""
    from django.db import models

    as_is = {models.CharField: str, models.TextField: str, models.FloatField: float}
    columns = [(field.attname, as_is.get(type(field)), field) for field in fields]
    return [
        [
            value if kind is not None and type(value) is kind else field.get_db_prep_save(value, connection)
            for name, kind, field in columns
            for value in (row[name],)
        ]
        for row in rows
    ]


def loggable(record: CallRecord) -> dict[str, Any]:
    """What `lose` logs of a record whose row could not even be built."""
    principal = record.principal
    return {
        "row_id": record.row_id,
        "created_at": record.created_at,
        "tool_name": record.tool_name,
        "username": principal.label,
        "auth_method": "",
        "outcome": record.outcome,
        "error_code": record.error_code,
        "duration_ms": record.duration_ms,
        "argument_keys": record.argument_keys,
        "argument_values": record.argument_values,
        "conversation_id": record.conversation_id,
    }
